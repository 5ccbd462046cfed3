"""Reads about facts: chains, memories, pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.models import Agent, AuditEntry, Fact, Principal, Supersession, Write

CHAIN_LIMIT = 100


def supersession_chain(fact: Fact) -> list[dict[str, object]]:
    """The whole chain through this fact, oldest first, walked both ways (bounded)."""
    older: list[Supersession] = []
    current = fact.pk
    seen = {current}
    for _ in range(CHAIN_LIMIT):
        link = Supersession.objects.filter(new_fact_id=current).order_by("-created_at").first()
        if link is None or link.old_fact_id in seen:
            break
        older.append(link)
        current = link.old_fact_id
        seen.add(current)
    newer: list[Supersession] = []
    current = fact.pk
    for _ in range(CHAIN_LIMIT):
        link = Supersession.objects.filter(old_fact_id=current).order_by("created_at").first()
        if link is None or link.new_fact_id in seen:
            break
        newer.append(link)
        current = link.new_fact_id
        seen.add(current)
    links = [*reversed(older), *newer]
    ids = {fact.pk} | {link.old_fact_id for link in links} | {link.new_fact_id for link in links}
    statuses = dict(Fact.objects.filter(pk__in=ids).values_list("pk", "status"))
    return [
        {
            "old_fact": link.old_fact_id,
            "old_status": statuses.get(link.old_fact_id),
            "new_fact": link.new_fact_id,
            "new_status": statuses.get(link.new_fact_id),
            "reason": link.reason,
            "decided_by": link.decided_by,
            "at": link.created_at.isoformat(),
        }
        for link in links
    ]


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
    from django.db.models import Q
    from django.utils import timezone

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
    status: object
    via: dict[str, object] | None
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
    ids = {int(str(link["old_fact"])) for link in links} | {int(str(link["new_fact"])) for link in links}
    chain_facts = Fact.objects.defer("embedding").in_bulk(ids)
    chain: list[ChainStep] = []
    for index, link in enumerate(links):
        if index == 0:
            old_id = int(str(link["old_fact"]))
            chain.append(
                ChainStep(old_id, chain_facts.get(old_id), link["old_status"], None, old_id == fact.pk)
            )
        new_id = int(str(link["new_fact"]))
        chain.append(ChainStep(new_id, chain_facts.get(new_id), link["new_status"], link, new_id == fact.pk))
    # The same entries as the fact's timeline: those about the fact itself and those that name
    # it (the write that proposed it, the decision that approved it), not only object_type "fact".
    from governance.selectors.audit import HistoryFilters, audit_entries

    audit = list(
        audit_entries([fact.project_id], HistoryFilters(fact=fact.pk))
        .select_related("actor_user")
        .order_by("sequence")
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
