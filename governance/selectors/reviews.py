"""Reads for the review queue (console and governance API).

The queue holds pending and quarantined writes of the caller's projects,
riskiest first, then oldest first (a write that has waited longest at the same
risk is next). Everything a reviewer needs per write is fetched for the whole
page in a fixed number of queries, so the page cost does not grow with its size.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db import connection
from django.db.models import Count, Q, QuerySet

from governance.models import Fact, Project, ReviewDecision, Write
from governance.models.writes import REVIEWABLE
from governance.rules import guard
from governance.rules.contradictions import is_conflict_review
from governance.rules.diff import SideBySide, word_diff
from governance.rules.labels import FINDINGS
from governance.rules.text import Lexical, LexicalPool
from governance.selectors import cursors
from governance.selectors.pages import narrowed
from governance.selectors.sessions import SummaryDiff, has_summary_finding, summary_diff

QUEUE_STATUSES = REVIEWABLE
PAGE_SIZE = 25
SIMILAR_LIMIT = 3
# What the queue shows of a similar fact (templates/governance/reviews/queue.html, "similar").
SIMILAR_FACT_FIELDS = ("id", "statement", "authority")
# Below this a "similar" fact is noise to a reviewer, whichever way it was measured.
SIMILAR_MIN = 0.35
# The cosine distance beyond which a fact cannot reach SIMILAR_MIN, widened a
# little so that rounding in the database never drops one the score keeps.
SIMILAR_MAX_DISTANCE = 1.0 - SIMILAR_MIN + 1e-9
# Facts per principal compared lexically when no embedding is available: the
# most recently verified ones (as for the embedding pool), which are the ones a
# write is most likely to repeat or contradict.
TEXT_POOL_PER_PRINCIPAL = 300
# The newest active facts of a principal a pending write is compared with by
# embedding: bounds the review page's cost for people with thousands of facts.
EMBEDDING_POOL_PER_PRINCIPAL = 1000

CHECK_LABELS: dict[str, str] = {check: found.text for check, found in FINDINGS.items()}
ACTION_WORDS: dict[str, str] = {
    "approve": "approved",
    "reject": "rejected",
    "edit_approve": "approved with edits",
    "keep_both": "kept both",
    "undo": "put back in the queue",
}


@dataclass(frozen=True)
class QueueCursor:
    """Keyset position in (risk desc, created_at asc, id asc): stable while the queue changes."""

    risk: int
    created_at: datetime
    id: int

    @classmethod
    def after(cls, write: Write) -> QueueCursor:
        return cls(write.risk, write.created_at, write.pk)

    def encode(self) -> str:
        return cursors.encode_cursor(self.created_at, self.risk, self.id)

    @classmethod
    def decode(cls, token: str) -> QueueCursor:
        """A queue cursor; InvalidCursor for anything else."""
        moment, (risk, write_id) = cursors.decode_cursor(token, 2)
        return cls(risk, moment, write_id)


@dataclass(frozen=True)
class QueuePage:
    writes: list[Write]
    next: QueueCursor | None


@dataclass(frozen=True)
class QueueFilters:
    """What a reviewer narrowed the queue to; empty values mean "any"."""

    project: str = ""
    agent: str = ""
    kind: str = ""
    finding: str = ""
    source: str = ""

    def apply(self, qs: QuerySet[Write]) -> QuerySet[Write]:
        qs = narrowed(
            qs, project__slug=self.project, agent__slug=self.agent, kind=self.kind, source_type=self.source
        )
        if self.finding:
            # findings is a JSON list of {"check": ..., ...}: containment matches one element.
            qs = qs.filter(findings__contains=[{"check": self.finding}])
        return qs


def review_queue(
    projects: QuerySet[Project],
    *,
    status: str | None = None,
    after: QueueCursor | None = None,
    limit: int = PAGE_SIZE,
    filters: QueueFilters | None = None,
) -> QueuePage:
    """One page of the queue; ``status`` narrows it to pending or quarantined writes."""
    statuses = [status] if status in QUEUE_STATUSES else list(QUEUE_STATUSES)
    narrowed_qs = (filters or QueueFilters()).apply(Write.objects.all())
    if after is not None:
        narrowed_qs = narrowed_qs.filter(
            Q(risk__lt=after.risk)
            | Q(risk=after.risk, created_at__gt=after.created_at)
            | Q(risk=after.risk, created_at=after.created_at, id__gt=after.id)
        )
    # The page's ids first: one ordered, limited walk of write_review_queue_idx
    # per project and status, merged. Asked in one go for every project and
    # both statuses, PostgreSQL read every waiting write of the projects (a
    # sequential scan of the table at 200 k writes) to sort them for one page.
    branches = [
        narrowed_qs.filter(project_id=project_id, status=one)
        .order_by("-risk", "created_at", "id")
        .values_list("id", "risk", "created_at")[: limit + 1]
        for project_id in projects.values_list("pk", flat=True)
        for one in statuses
    ]
    if not branches:
        return QueuePage(writes=[], next=None)
    merged = branches[0].union(*branches[1:], all=True) if len(branches) > 1 else branches[0]
    keys = sorted(merged, key=lambda row: (-row[1], row[2], row[0]))[: limit + 1]
    by_id = (
        Write.objects.filter(pk__in=[row[0] for row in keys])
        .select_related("project", "agent", "principal", "session", "fact", "conflicts_with")
        # Vectors are compared in SQL; loading them would only cost memory.
        .defer("fact__embedding", "conflicts_with__embedding")
        .in_bulk()
    )
    rows = [by_id[row[0]] for row in keys if row[0] in by_id]
    more = len(rows) > limit
    rows = rows[:limit]
    return QueuePage(writes=rows, next=QueueCursor.after(rows[-1]) if more and rows else None)


def queue_counts(projects: QuerySet[Project], filters: QueueFilters | None = None) -> dict[str, int]:
    waiting = Write.objects.filter(project__in=projects, status__in=QUEUE_STATUSES)
    counts = (
        (filters or QueueFilters())
        .apply(waiting)
        # The status is counted, not the id: with nothing to read but the project
        # and the status, write_review_queue_idx answers alone (index-only: 1.5 ms
        # for a project's 1,859 waiting writes among 200 k, 15 ms through the table).
        .aggregate(
            pending_review=Count("status", filter=Q(status="pending_review")),
            quarantined=Count("status", filter=Q(status="quarantined")),
        )
    )
    return {name: int(counts[name] or 0) for name in QUEUE_STATUSES}


@dataclass(frozen=True)
class FindingView:
    check: str
    label: str
    severity: str
    detail: str
    # Optional, from the guard: the quoted evidence (hidden characters as
    # markers), its span in the statement, and which field it is in.
    evidence: str = ""
    span: tuple[int, int] | None = None
    field: str = "statement"


@dataclass(frozen=True)
class SimilarFact:
    fact: Fact
    score: float
    method: Literal["embedding", "text"]

    @property
    def percent(self) -> int:
        return round(self.score * 100)


@dataclass
class ReviewItem:
    """One write as a reviewer sees it. ``form`` is the view's, for re-display with errors."""

    write: Write
    findings: list[FindingView]
    supersedes: Fact | None
    diff: SideBySide | None
    similar: list[SimilarFact]
    form: Any = None
    # Whether the viewer's role in this write's project lets them decide it (set by the view).
    can_decide: bool = False
    # R17: for flagged summaries, the source with the dropped items marked.
    summary_diff: SummaryDiff | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The statement split for display (see ``statement_segments``).
    statement_segments: list[guard.Segment] = field(default_factory=list)
    # A possible conflict between two facts already in memory (services/conflicts.py):
    # the reviewer keeps both, lets the newer replace the older, or rejects the newer.
    conflict_review: bool = False
    # False when the similar facts were left for a later request (``review_items(with_similar=False)``).
    similar_loaded: bool = True


def finding_views(findings: list[dict[str, str]] | None) -> list[FindingView]:
    out = []
    for finding in findings or []:
        check = str(finding.get("check", ""))
        out.append(
            FindingView(
                check=check,
                label=CHECK_LABELS.get(check, check.replace("_", " ").capitalize()),
                severity=str(finding.get("severity", "low")),
                detail=str(finding.get("detail", "")),
                evidence=str(finding.get("evidence") or ""),
                span=_span(finding.get("span")),
                field=str(finding.get("field") or "statement"),
            )
        )
    return out


def _span(value: object) -> tuple[int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (int(value[0]), int(value[1]))
    return None


def statement_segments(statement: str, findings: list[FindingView]) -> list[guard.Segment]:
    """The statement as the queue shows it: evidence highlighted, hidden characters as markers."""
    spans = [f.span for f in findings if f.span is not None and f.field == "statement"]
    return guard.display_segments(statement, spans)


def queue_write(write_id: int) -> Write:
    """One write as a queue item shows it: its project, agent, person, session and facts."""
    return (
        Write.objects.select_related("project", "agent", "principal", "session", "fact", "conflicts_with")
        .defer("fact__embedding", "conflicts_with__embedding")
        .get(pk=write_id)
    )


def review_items(writes: list[Write], *, with_similar: bool = True) -> list[ReviewItem]:
    """Everything the queue shows per write, batched for the page.

    ``with_similar=False`` leaves out the similar facts, the costliest part
    (each person's pool of facts): the queue page asks for them afterwards
    with ``similar_facts`` so its first answer does not wait for them.
    """
    targets = _supersede_targets(writes)
    similar = (
        _similar_facts(writes, exclude={w.pk: targets.get(w.pk) for w in writes}) if with_similar else {}
    )
    items = []
    for write in writes:
        target = targets.get(write.pk)
        findings = finding_views(write.findings)
        items.append(
            ReviewItem(
                write=write,
                findings=findings,
                statement_segments=statement_segments(write.statement, findings),
                conflict_review=is_conflict_review(write.source_ref, write.conflicts_with_id),
                supersedes=target,
                diff=word_diff(target.statement, write.statement) if target is not None else None,
                similar=similar.get(write.pk, []),
                summary_diff=summary_diff(write.fact) if has_summary_finding(write) else None,
                similar_loaded=with_similar,
            )
        )
    return items


def similar_facts(writes: list[Write]) -> dict[int, list[SimilarFact]]:
    """The similar facts of each write, by write id; never the fact it would supersede."""
    targets = _supersede_targets(writes)
    return _similar_facts(writes, exclude={w.pk: targets.get(w.pk) for w in writes})


def waiting_writes(projects: QuerySet[Project], ids: list[int]) -> list[Write]:
    """The writes among ``ids`` that wait for review in ``projects``, in the queue's order, with
    what ``similar_facts`` reads of them and the similar facts' page shows (WAITING_WRITE_FIELDS).

    Read with the agent, the person, the session and both facts whole, as the
    queue shows a write, the eight tables took the planner ~5 ms to join, and
    the ~150 model instances ~10 ms to build, for the few columns used here.
    """
    return list(
        Write.objects.filter(pk__in=ids, project__in=projects, status__in=QUEUE_STATUSES)
        .select_related("fact", "conflicts_with")
        .only(*WAITING_WRITE_FIELDS)
        .order_by("-risk", "created_at", "id")
    )


# The columns of a waiting write that its similar facts need (``_supersede_targets``,
# ``_similar_facts``) and templates/governance/reviews/similar.html shows.
WAITING_WRITE_FIELDS = (
    "id",
    "project",
    "principal",
    "session",
    "kind",
    "key",
    "statement",
    "fact__id",
    "fact__embedded_at",
    "conflicts_with__id",
)


def _fact_session_id(write: Write) -> int | None:
    # Slots are keyed within their session; every other kind has no session.
    return write.session_id if write.kind == "slot" else None


def _supersede_targets(writes: list[Write]) -> dict[int, Fact]:
    """What approving each write would replace (R6).

    The active fact for the same principal and key is what ``decide`` will
    supersede, so it wins over ``conflicts_with``, which was recorded at
    arrival and may itself have been replaced since.
    """
    keyed = [w for w in writes if w.key]
    current: dict[tuple[int, int | None, int | None, str], Fact] = {}
    if keyed:
        wanted = Q()
        for w in keyed:
            wanted |= Q(
                project_id=w.project_id,
                principal_id=w.principal_id,
                session_id=_fact_session_id(w),
                key=w.key,
            )
        for active in Fact.objects.filter(wanted, status="active"):
            assert active.key is not None
            current[(active.project_id, active.principal_id, active.session_id, active.key)] = active
    targets: dict[int, Fact] = {}
    for w in writes:
        found = (
            current.get((w.project_id, w.principal_id, _fact_session_id(w), w.key or "")) if w.key else None
        )
        if found is not None and found.pk == w.fact_id:
            found = None
        target = found or w.conflicts_with
        if target is not None:
            targets[w.pk] = target
    return targets


def _similar_facts(writes: list[Write], *, exclude: dict[int, Fact | None]) -> dict[int, list[SimilarFact]]:
    """A few active facts about the same principal that read like each write.

    By cosine distance (pgvector) when the write's fact is embedded, otherwise
    lexically; a write whose embedding search finds nothing also falls back to
    text, since its neighbours may not be embedded yet.
    """
    result: dict[int, list[SimilarFact]] = {}
    embedded = [w for w in writes if w.fact is not None and w.fact.embedded_at is not None]
    if embedded:
        result.update(_similar_by_embedding(embedded, exclude))
    rest = [w for w in writes if not result.get(w.pk)]
    if rest:
        result.update(_similar_by_text(rest, exclude))
    return result


def _newest_active(column: str, condition: str = "") -> str:
    """A LATERAL body: the newest active facts (id and ``column``) of ``people``'s person, at most
    ``%s`` (a parameter, given twice), or the project's principal-less ones for a write about no one.

    Read in order from fact_principal_verified_idx and stopped at the limit. The
    second branch stands in for ``IS NOT DISTINCT FROM``, which no index answers.
    """
    table = Fact._meta.db_table
    return f"""(
            (SELECT f.id, {column}
               FROM {table} f
              WHERE f.project_id = people.project_id AND f.principal_id = people.principal_id
                AND f.status = 'active' {condition}
              ORDER BY f.last_verified_at DESC
              LIMIT %s)
            UNION ALL
            (SELECT f.id, {column}
               FROM {table} f
              WHERE people.principal_id IS NULL AND f.project_id = people.project_id
                AND f.principal_id IS NULL AND f.status = 'active' {condition}
              ORDER BY f.last_verified_at DESC
              LIMIT %s)
        )"""


def _similar_by_embedding(
    writes: list[Write], exclude: dict[int, Fact | None]
) -> dict[int, list[SimilarFact]]:
    fact_table = Fact._meta.db_table
    write_table = Write._meta.db_table
    # One query for the page. The pool of each person on the page (their newest
    # EMBEDDING_POOL_PER_PRINCIPAL active facts, or the project's newest
    # principal-less ones) is read once through fact_principal_verified_idx and
    # materialised, then joined once with the page's writes by person, so that
    # each write is compared with its own person's pool only and keeps its
    # nearest: a page of 25 writes about one person reads 1,000 facts, not
    # 25,000. (Scanned again by every write, the pool outgrew work_mem at a few
    # large people: 25 reads of a 5 MB temporary file, 90 ms at 200 k facts.)
    # The pool's two branches stand in for ``IS NOT DISTINCT FROM``: with it,
    # every write scanned its whole project (1.35 s for a page of one large
    # principal's writes at 30 k facts, docs/performance.md); the join
    # compares ids with 0 for "no principal" (ids start at 1) so it can hash.
    # Only facts near enough to be shown are ranked (SIMILAR_MAX_DISTANCE): most
    # of a person's facts are about something else, and sorting all of them by
    # distance was half of the statement's time (25,000 rows for a page of one
    # person's writes). The farther ones would be dropped below anyway.
    # Table names come from model metadata; every value is a query parameter.
    sql = f"""
        WITH page AS MATERIALIZED (
            SELECT w.id, w.project_id, w.principal_id, wf.id AS fact_id, wf.embedding
              FROM {write_table} w
              JOIN {fact_table} wf ON wf.id = w.fact_id
             WHERE w.id = ANY(%s) AND wf.embedding IS NOT NULL
        ), pool AS MATERIALIZED (
            SELECT people.project_id, people.principal_id, near.id, near.embedding
              FROM (SELECT DISTINCT project_id, principal_id FROM page) people
             CROSS JOIN LATERAL {_newest_active("f.embedding")} near
             WHERE near.embedding IS NOT NULL
        )
        SELECT write_id, fact_id, distance
          FROM (
            SELECT mine.id AS write_id, pool.id AS fact_id,
                   pool.embedding <=> mine.embedding AS distance,
                   row_number() OVER (
                       PARTITION BY mine.id ORDER BY pool.embedding <=> mine.embedding
                   ) AS nth
              FROM pool
              JOIN page mine
                ON mine.project_id = pool.project_id
               AND COALESCE(mine.principal_id, 0) = COALESCE(pool.principal_id, 0)
             WHERE pool.id <> mine.fact_id AND pool.embedding <=> mine.embedding <= %s
          ) ranked
         WHERE nth <= %s
    """
    pool = EMBEDDING_POOL_PER_PRINCIPAL
    with connection.cursor() as cursor:
        cursor.execute(sql, [[w.pk for w in writes], pool, pool, SIMILAR_MAX_DISTANCE, SIMILAR_LIMIT + 1])
        rows = cursor.fetchall()
    facts = _shown_facts({fact_id for _, fact_id, _ in rows})
    out: dict[int, list[SimilarFact]] = {}
    for write_id, fact_id, distance in sorted(rows, key=lambda r: (r[0], r[2])):
        skip = exclude.get(write_id)
        score = max(0.0, 1.0 - float(distance))
        if (skip is not None and skip.pk == fact_id) or score < SIMILAR_MIN or fact_id not in facts:
            continue
        bucket = out.setdefault(write_id, [])
        if len(bucket) < SIMILAR_LIMIT:
            bucket.append(SimilarFact(facts[fact_id], score, "embedding"))
    return out


def _shown_facts(ids: set[int]) -> dict[int, Fact]:
    """The similar facts' columns that the queue shows (SIMILAR_FACT_FIELDS), by id.

    Read whole, a fact is its vector (384 numbers) and some twenty columns,
    half of them times parsed in Python: ~11 ms for the 66 facts of a page.
    """
    return Fact.objects.only(*SIMILAR_FACT_FIELDS).in_bulk(ids)


def _similar_by_text(writes: list[Write], exclude: dict[int, Fact | None]) -> dict[int, list[SimilarFact]]:
    people = sorted({(w.project_id, w.principal_id) for w in writes}, key=lambda p: (p[0], p[1] or 0))
    # Each person's newest TEXT_POOL_PER_PRINCIPAL active facts (a window over
    # the whole of each person's facts read 14,000 rows to keep 1,000). Scored
    # on their statements alone; only the few facts shown are read whole.
    sql = f"""
        SELECT people.project_id, people.principal_id, near.id, near.statement
          FROM unnest(%s::bigint[], %s::bigint[]) AS people(project_id, principal_id)
         CROSS JOIN LATERAL {_newest_active("f.statement", "AND f.statement <> ''")} near
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                [p[0] for p in people],
                [p[1] for p in people],
                TEXT_POOL_PER_PRINCIPAL,
                TEXT_POOL_PER_PRINCIPAL,
            ],
        )
        pool = cursor.fetchall()
    texts: dict[tuple[int, int | None], list[tuple[int, Lexical]]] = {}
    for project_id, principal_id, fact_id, text in pool:
        texts.setdefault((project_id, principal_id), []).append((fact_id, Lexical.of(text)))
    # Each person's pool is prepared once, for as many of their writes as the page has.
    uses = Counter((w.project_id, w.principal_id) for w in writes)
    by_scope = {
        scope: (
            [fact_id for fact_id, _ in rows],
            LexicalPool([prepared for _, prepared in rows], uses=uses[scope]),
        )
        for scope, rows in texts.items()
    }
    chosen: dict[int, list[tuple[int, float]]] = {}
    for w in writes:
        scope = by_scope.get((w.project_id, w.principal_id))
        if scope is None:
            continue
        skip = {w.fact_id, getattr(exclude.get(w.pk), "pk", None)}
        fact_ids, prepared = scope
        scores = prepared.similarities(Lexical.of(w.statement))
        # The most similar first, the newer of equals first: (score, id) at their largest.
        best = heapq.nlargest(
            SIMILAR_LIMIT,
            (
                (score, fact_id)
                for fact_id, score in zip(fact_ids, scores, strict=True)
                if score >= SIMILAR_MIN and fact_id not in skip
            ),
        )
        if best:
            chosen[w.pk] = [(fact_id, score) for score, fact_id in best]
    shown = {fact_id for pairs in chosen.values() for fact_id, _ in pairs}
    facts = _shown_facts(shown)
    return {
        write_id: [SimilarFact(facts[fact_id], score, "text") for fact_id, score in pairs if fact_id in facts]
        for write_id, pairs in chosen.items()
    }


@dataclass(frozen=True)
class DecidedInfo:
    write: Write
    reviewer: str | None
    action: str | None
    reason: str
    at: datetime | None

    @property
    def verb(self) -> str:
        if self.action:
            return ACTION_WORDS.get(self.action, self.action)
        return self.write.status.replace("_", " ")

    @property
    def message(self) -> str:
        if self.reviewer:
            return f"Already decided by {self.reviewer}: {self.verb}."
        return f"Already decided: this write is {self.verb} and no longer waits for review."


def decided_info(write_id: int) -> DecidedInfo:
    """Who decided a write, for the reviewer who lost the race (or came late)."""
    write = Write.objects.select_related("fact").get(pk=write_id)
    decision = (
        ReviewDecision.objects.filter(write_id=write_id)
        .select_related("reviewer")
        .order_by("-sequence")
        .first()
    )
    if decision is None:
        return DecidedInfo(write=write, reviewer=None, action=None, reason="", at=write.decided_at)
    return DecidedInfo(
        write=write,
        reviewer=decision.reviewer.get_username(),
        action=decision.action,
        reason=decision.reason,
        at=decision.created_at,
    )


@dataclass(frozen=True)
class QueueFilterChoices:
    projects: list[str]
    agents: list[str]


def queue_filter_choices(projects: QuerySet[Project]) -> QueueFilterChoices:
    """The projects and agents a reviewer can narrow the queue to (two small queries)."""
    from governance.models import Agent

    return QueueFilterChoices(
        projects=sorted(projects.values_list("slug", flat=True)),
        agents=sorted(set(Agent.objects.filter(project__in=projects).values_list("slug", flat=True))),
    )
