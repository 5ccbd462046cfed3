"""Reads about facts: chains, memories, the fact page and its full timeline, the fact list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.models import Agent, AuditEntry, CandidateRecord, Fact, Principal, RetrievalEvent, Write
from governance.models.retrievals import decode_candidates, events_naming
from governance.selectors.audit import HistoryFilters, audit_entries
from governance.selectors.pages import Page, narrowed, newest_first

CHAIN_LIMIT = 100


@dataclass(frozen=True)
class ChainLink:
    """One supersession of a chain: the old and new fact (ids and current statuses), why, who, when."""

    old_fact: int
    old_status: str
    new_fact: int
    new_status: str
    reason: str
    decided_by: str
    at: datetime


# Walked both ways from the fact in one statement. Each step follows one link
# only: backwards the newest supersession that produced the current fact,
# forwards the oldest that replaced it; a step that would revisit a fact
# already seen (in either direction) ends that walk, and each walk stops after
# CHAIN_LIMIT links. ``depth`` orders the result oldest first.
_CHAIN_SQL = """
WITH RECURSIVE
older (link_id, fact_id, depth, seen) AS (
    SELECT NULL::bigint, %(fact)s::bigint, 0, ARRAY[%(fact)s::bigint]
    UNION ALL
    SELECT link.id, link.old_fact_id, older.depth + 1, older.seen || link.old_fact_id
    FROM older
    CROSS JOIN LATERAL (
        SELECT id, old_fact_id FROM governance_supersession
        WHERE new_fact_id = older.fact_id
        ORDER BY created_at DESC, id DESC
        LIMIT 1
    ) AS link
    WHERE older.depth < %(limit)s AND link.old_fact_id <> ALL (older.seen)
),
newer (link_id, fact_id, depth, seen) AS (
    SELECT NULL::bigint, %(fact)s::bigint, 0, (SELECT array_agg(fact_id) FROM older)
    UNION ALL
    SELECT link.id, link.new_fact_id, newer.depth + 1, newer.seen || link.new_fact_id
    FROM newer
    CROSS JOIN LATERAL (
        SELECT id, new_fact_id FROM governance_supersession
        WHERE old_fact_id = newer.fact_id
        ORDER BY created_at, id
        LIMIT 1
    ) AS link
    WHERE newer.depth < %(limit)s AND link.new_fact_id <> ALL (newer.seen)
),
chain (link_id, position) AS (
    SELECT link_id, -depth FROM older WHERE link_id IS NOT NULL
    UNION ALL
    SELECT link_id, depth FROM newer WHERE link_id IS NOT NULL
)
SELECT s.old_fact_id, old_fact.status, s.new_fact_id, new_fact.status, s.reason, s.decided_by, s.created_at
FROM chain
JOIN governance_supersession AS s ON s.id = chain.link_id
JOIN governance_fact AS old_fact ON old_fact.id = s.old_fact_id
JOIN governance_fact AS new_fact ON new_fact.id = s.new_fact_id
ORDER BY chain.position
"""


def supersession_chain(fact: Fact) -> list[ChainLink]:
    """The whole chain through this fact, oldest first, walked both ways (bounded), in one query."""
    with connection.cursor() as cursor:
        cursor.execute(_CHAIN_SQL, {"fact": fact.pk, "limit": CHAIN_LIMIT})
        return [ChainLink(*row) for row in cursor.fetchall()]


def visible_to_agent(agent: Agent) -> QuerySet[Fact]:
    """The facts an agent key may read or act on, following retrieval's scoping.

    Its project only (R1), and a slot (working memory of one session) only
    for the agent of that session: another agent's slots answer 404, like any
    id outside the key's reach.
    """
    return Fact.objects.filter(project_id=agent.project_id).filter(~Q(kind="slot") | Q(session__agent=agent))


def kept_for_review(fact: Fact) -> QuerySet[Write]:
    """Writes of a withdrawn fact's statement that an agent's withdrawal left for a reviewer.

    Same project and principal, same keyed fingerprint, text still there: the
    held-back or rejected writes a person may erase from the fact page.
    """
    if fact.status != "withdrawn":
        return Write.objects.none()
    same_principal = (
        Q(principal_id=fact.principal_id) if fact.principal_id is not None else Q(principal__isnull=True)
    )
    return (
        Write.objects.filter(same_principal, project_id=fact.project_id, fingerprint=fact.fingerprint)
        .exclude(statement="")
        .order_by("pk")
    )


def active_memories(principal: Principal) -> QuerySet[Fact]:
    """Active, still-valid facts about the person (slots excluded: they are session state)."""
    now = timezone.now()
    return (
        Fact.objects.filter(principal=principal, status="active")
        .exclude(kind="slot")
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=now))
        .select_related("principal")
        .order_by("kind", "-last_verified_at", "id")
    )


# --- The console's fact page (issue 3 item 6) --------------------------------

# Fields whose changes the fact page's history lists, in reading order.
HISTORY_FIELDS = (
    "status",
    "status_reason",
    "authority",
    "confidence",
    "valid_from",
    "valid_to",
    "last_verified_at",
    "embedded_at",
    "statement_digest",
)


@dataclass(frozen=True)
class HistoryRow:
    at: datetime
    label: str
    actor: str
    changes: list[tuple[str, object, object]]


@dataclass(frozen=True)
class TimePoint:
    at: datetime
    label: str
    future: bool = False


@dataclass(frozen=True)
class ChainStep:
    """One fact in a supersession chain, with the link that led to it (None for the oldest)."""

    fact_id: int
    fact: Fact | None
    status: str
    via: ChainLink | None
    current: bool


@dataclass(frozen=True)
class FactPage:
    fact: Fact
    timeline: list[TimePoint]
    chain: list[ChainStep]
    audit: list[AuditEntry]
    history: list[HistoryRow]
    writes: list[Write]


def fact_page(fact: Fact) -> FactPage:
    """Everything the fact page shows: provenance, timelines, chain, audit, writes."""
    links = supersession_chain(fact)
    ids = {link.old_fact for link in links} | {link.new_fact for link in links}
    chain_facts = Fact.objects.defer("embedding").in_bulk(ids)
    chain: list[ChainStep] = []
    for index, link in enumerate(links):
        if index == 0:
            chain.append(
                ChainStep(
                    link.old_fact,
                    chain_facts.get(link.old_fact),
                    link.old_status,
                    None,
                    link.old_fact == fact.pk,
                )
            )
        chain.append(
            ChainStep(
                link.new_fact, chain_facts.get(link.new_fact), link.new_status, link, link.new_fact == fact.pk
            )
        )
    # The same entries as the fact's timeline: those about the fact itself and those that name
    # it (the write that proposed it, the decision that approved it), not only object_type "fact".
    audit = list(
        audit_entries([fact.project_id], HistoryFilters(fact=fact.pk))
        .select_related("actor_user")
        # Recording order: an entry waiting to be sealed has no sequence yet.
        .order_by("created_at", "id")
    )
    writes = list(
        Write.objects.filter(Q(fact=fact) | Q(corroborated=fact))
        .select_related("agent", "principal")
        .prefetch_related("decisions__reviewer")
        .order_by("created_at", "id")
    )
    return FactPage(
        fact=fact,
        timeline=validity_timeline(fact, timezone.now()),
        chain=chain,
        audit=audit,
        history=fact_history(fact),
        writes=writes,
    )


def validity_timeline(fact: Fact, now: datetime) -> list[TimePoint]:
    """The fact's moments in time order, with "now" placed among them."""
    points = [
        TimePoint(fact.source_observed_at, "Observed at the source"),
        TimePoint(fact.recorded_at, "Recorded"),
        TimePoint(fact.last_verified_at, "Last verified (freshness counts from here)"),
    ]
    if fact.valid_from is not None:
        points.append(TimePoint(fact.valid_from, "Valid from"))
    if fact.status != "active" and fact.status_changed_at is not None:
        points.append(TimePoint(fact.status_changed_at, f"Became {fact.status.replace('_', ' ')}"))
    if fact.valid_to is not None:
        points.append(TimePoint(fact.valid_to, "Valid until"))
    points = [TimePoint(p.at, p.label, future=p.at > now) for p in points]
    points.append(TimePoint(now, "Now"))
    return sorted(points, key=lambda p: (p.at, p.label == "Now"))


def fact_history(fact: Fact) -> list[HistoryRow]:
    """The row history (pghistory), each event with what changed since the one before."""
    event_model: Any = Fact.pgh_event_model  # type: ignore[attr-defined]  # added by pghistory.track at runtime
    events = list(event_model.objects.filter(pgh_obj_id=fact.pk).order_by("pgh_created_at", "pgh_id"))
    rows: list[HistoryRow] = []
    previous: Any = None
    for event in events:
        changes: list[tuple[str, object, object]] = []
        for name in HISTORY_FIELDS:
            new = getattr(event, name)
            old = getattr(previous, name) if previous is not None else None
            if previous is None or old != new:
                # The statement is erasable content: the page names the change, never the text.
                if name == "statement_digest":
                    if previous is not None:
                        changes.append(("statement", "", "edited"))
                    continue
                if previous is None and new in (None, ""):
                    continue
                changes.append((name, old, new))
        context = event.pgh_context or {}
        rows.append(
            HistoryRow(
                at=event.pgh_created_at,
                label=event.pgh_label,
                actor=str(context.get("actor") or context.get("user") or "system"),
                changes=changes,
            )
        )
        previous = event
    return rows


# --- A fact's full timeline --------------------------------------------------------

CANDIDATE_LIMIT = 200


@dataclass(frozen=True)
class TimelineEvent:
    at: datetime
    kind: str  # audit | history | supersession | retrieval
    label: str
    actor: str = ""
    reason: str = ""
    detail: str = ""
    audit: AuditEntry | None = None
    history: HistoryRow | None = None
    supersession: ChainLink | None = None
    candidate: CandidateRecord | None = None


@dataclass(frozen=True)
class FactTimeline:
    fact: Fact
    events: list[TimelineEvent]
    retrievals_total: int
    retrievals_shown: int
    tombstone: Any


def fact_timeline(fact: Fact) -> FactTimeline:
    """Audit entries, row history, supersessions and retrieval decisions of one fact, oldest first."""
    events: list[TimelineEvent] = []
    entries = (
        audit_entries([fact.project_id], HistoryFilters(fact=fact.pk))
        .select_related("actor_user")
        .order_by("created_at", "id")
    )
    for entry in entries:
        events.append(
            TimelineEvent(
                at=entry.created_at,
                kind="audit",
                label=entry.action,
                actor=entry.actor,
                reason=entry.reason,
                detail=f"#{entry.sequence or '(sealing)'} {entry.object_type}:{entry.object_id}",
                audit=entry,
            )
        )
    for row in fact_history(fact):
        events.append(TimelineEvent(at=row.at, kind="history", label=row.label, actor=row.actor, history=row))
    for link in supersession_chain(fact):
        if fact.pk not in (link.old_fact, link.new_fact):
            continue
        events.append(
            TimelineEvent(
                at=link.at,
                kind="supersession",
                label=f"fact {link.old_fact} → fact {link.new_fact}",
                actor=link.decided_by,
                reason=link.reason,
                supersession=link,
            )
        )
    retrievals = RetrievalEvent.objects.filter(pk__in=events_naming(fact.pk))
    total = retrievals.count()
    shown = list(
        retrievals.order_by("-created_at", "-id").values_list(
            "id", "created_at", "agent__slug", "candidate_data"
        )[:CANDIDATE_LIMIT]
    )
    for event_id, at, agent_slug, data in shown:
        candidate = next(c for c in decode_candidates(event_id, data) if c.fact_id == fact.pk)
        events.append(
            TimelineEvent(
                at=at,
                kind="retrieval",
                label=candidate.decision,
                actor=f"agent:{agent_slug}",
                reason=candidate.reason or "",
                candidate=candidate,
            )
        )
    order = {"history": 0, "audit": 1, "supersession": 2, "retrieval": 3}
    events.sort(key=lambda e: (e.at, order[e.kind]))
    tombstone = getattr(fact, "tombstone", None) if fact.status == "withdrawn" else None
    return FactTimeline(fact, events, total, len(shown), tombstone)


# --- The console's fact list (issue 16 item 7) --------------------------------


@dataclass(frozen=True)
class FactFilters:
    project: int | None = None
    principal: str | None = None  # external id, exact
    status: str | None = None
    kind: str | None = None
    source_type: str | None = None
    text: str | None = None  # words or part of the statement (selectors.search)


def fact_list(project_ids: list[int], filters: FactFilters, *, cursor: int | None, limit: int) -> Page[Fact]:
    """Facts of ``project_ids`` matching ``filters``, newest first: one query."""
    from governance.selectors.search import found

    qs = narrowed(
        Fact.objects.filter(project_id__in=project_ids),
        project_id=filters.project,
        principal__external_id=filters.principal,
        status=filters.status,
        kind=filters.kind,
        source_type=filters.source_type,
    )
    if filters.text:
        # Every match (no limit), through the indexes; the page then keeps its newest-first order.
        qs = qs.filter(found(Fact, project_ids, filters.text))
    qs = qs.select_related("project", "principal", "agent").defer(
        "embedding", "summary_source", "summary_check", "project__source_caps"
    )
    return newest_first(qs, cursor=cursor, limit=limit)
