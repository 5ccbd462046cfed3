"""Reads for auditors: the history across the audit trail and retrievals, its export, the chain's check.

The history merges two append-only sources, ``AuditEntry`` (facts, writes,
decisions, policies, keys and tokens, projects, sessions) and
``RetrievalEvent``, ordered by (created_at, source, id). Pages are keyset
pages on that triple, so page 1,000 costs what page 1 costs; the export walks
the same order with server-side cursors. Neither source holds erasable
content: audit entries carry digests, and retrieval text is not exported.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import CharField, Q, QuerySet, Value
from django.db.models.functions import Cast
from django.db.models.query import EmptyQuerySet

from governance.models import (
    AuditEntry,
    Fact,
    Principal,
    RetrievalEvent,
    Session,
    Supersession,
    Write,
)
from governance.models.retrievals import events_naming
from governance.rules.audit import BrokenLink, first_broken_link
from governance.selectors import cursors
from governance.selectors.cursors import InvalidCursor
from governance.selectors.pages import narrowed

AUDIT = "audit"
RETRIEVAL = "retrieval"
# The source is the middle of the sort key: at one instant, audit entries sort before retrievals.
SOURCE_RANK = {AUDIT: 0, RETRIEVAL: 1}
RETRIEVAL_ACTION = "retrieval"
# Families the action filter accepts as a prefix ("fact" = every fact.* action).
ACTION_FAMILIES = (
    "fact",
    "write",
    "policy",
    "agent",
    "agent_key",
    "access_token",
    "project",
    "session",
    "membership",
    "admin",
    "audit",
    RETRIEVAL_ACTION,
)
KNOWN_ACTIONS = (
    "fact.superseded",
    "fact.corroborated",
    "fact.verified",
    "fact.authority_changed",
    "fact.withdrawn",
    "fact.expired",
    "fact.out_of_scope",
    "fact.flagged",
    "fact.possible_conflict",
    "write.submitted",
    # The guard's meaning model held a plain statement after its write was answered.
    "write.held_after_meaning_check",
    "write.approve",
    "write.reject",
    "write.edit_approve",
    "write.keep_both",
    "write.undo",
    "policy.draft_saved",
    "policy.published",
    "policy.rolled_back",
    "agent_key.created",
    "agent_key.revoked",
    "access_token.created",
    "access_token.revoked",
    "membership.granted",
    "membership.role_changed",
    "membership.revoked",
    "agent.created",
    "agent.retired",
    "project.archived",
    "session.ended",
    # A month of the retrieval log dropped past retention (services.retention).
    "retrievals.expired",
    # Migration 0010 re-keyed the statement digests and re-linked the chain.
    "audit.rekeyed",
)

Cursor = tuple[datetime, int, int]  # (created_at, source rank, id)


def decode_cursor(value: str) -> Cursor:
    """A history cursor; InvalidCursor for anything else."""
    moment, (rank, row_id) = cursors.decode_cursor(value, 2)
    if rank not in SOURCE_RANK.values():
        raise InvalidCursor
    return moment, rank, row_id


@dataclass(frozen=True)
class HistoryFilters:
    actor: str | None = None  # exact label: user:<name>, agent:<slug>, system:...
    action: str | None = None  # exact action, a family ("fact"), or "retrieval"
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive
    principal: str | None = None  # external id
    fact: int | None = None
    project: str | None = None  # slug, to narrow a multi-project user's view
    show: str = "all"  # "changes" (audit entries), "retrievals", or "all"


@dataclass(frozen=True)
class HistoryItem:
    """One row of the history, whichever source it came from."""

    source: str
    id: int
    created_at: datetime
    project: str
    actor: str
    action: str
    object_type: str
    object_id: str
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    sequence: int | None = None
    principal: str | None = None
    request_id: str = ""
    previous_hash: str = ""
    entry_hash: str = ""

    @property
    def fact_id(self) -> int | None:
        """The fact this row is about, for the timeline link."""
        if self.object_type == "fact" and self.object_id.isdigit():
            return int(self.object_id)
        value = self.data.get("fact") if self.source == AUDIT else None
        return value if isinstance(value, int) else None

    @property
    def cursor(self) -> str:
        return cursors.encode_cursor(self.created_at, SOURCE_RANK[self.source], self.id)

    def export_row(self) -> dict[str, Any]:
        row = {column: getattr(self, column) for column in EXPORT_COLUMNS}
        return {**row, "created_at": self.created_at.isoformat()}


EXPORT_COLUMNS = (
    "source",
    "id",
    "project",
    "sequence",
    "created_at",
    "actor",
    "action",
    "object_type",
    "object_id",
    "principal",
    "reason",
    "data",
    "request_id",
    "previous_hash",
    "entry_hash",
)


def _as_text(qs: QuerySet[Any]) -> QuerySet[Any]:
    """Ids as text: AuditEntry.object_id is a string column."""
    return qs.annotate(object_text=Cast("pk", CharField())).values("object_text")


def _principals(project_ids: list[int], external_id: str) -> QuerySet[Principal]:
    return Principal.objects.filter(project_id__in=project_ids, external_id=external_id)


def _fact_writes(fact_id: int) -> QuerySet[Write]:
    return Write.objects.filter(
        Q(fact_id=fact_id) | Q(corroborated_id=fact_id) | Q(conflicts_with_id=fact_id)
    )


def audit_entries(project_ids: list[int], filters: HistoryFilters) -> QuerySet[AuditEntry]:
    """Audit entries matching the filters; every condition is index-friendly or a subquery."""
    qs = AuditEntry.objects.filter(project_id__in=project_ids)
    if filters.show == "retrievals":
        return qs.none()
    qs = narrowed(qs, actor=filters.actor, created_at__gte=filters.since, created_at__lt=filters.until)
    if filters.action:
        if filters.action == RETRIEVAL_ACTION:
            return qs.none()
        qs = (
            qs.filter(action=filters.action)
            if "." in filters.action
            else qs.filter(action__startswith=f"{filters.action}.")
        )
    if filters.principal:
        people = _principals(project_ids, filters.principal)
        qs = qs.filter(
            Q(object_type="fact", object_id__in=_as_text(Fact.objects.filter(principal__in=people)))
            | Q(object_type="write", object_id__in=_as_text(Write.objects.filter(principal__in=people)))
            | Q(object_type="session", object_id__in=_as_text(Session.objects.filter(principal__in=people)))
        )
    if filters.fact is not None:
        # The entry that superseded an older fact is recorded on the older one.
        replaced = Supersession.objects.filter(new_fact_id=filters.fact)
        qs = qs.filter(
            Q(object_type="fact", object_id=str(filters.fact))
            | Q(
                object_type="fact",
                action="fact.superseded",
                object_id__in=_as_text(Fact.objects.filter(pk__in=replaced.values("old_fact_id"))),
            )
            | Q(object_type="write", object_id__in=_as_text(_fact_writes(filters.fact)))
        )
    return qs


def retrieval_events(project_ids: list[int], filters: HistoryFilters) -> QuerySet[RetrievalEvent]:
    qs = RetrievalEvent.objects.filter(project_id__in=project_ids)
    if filters.show == "changes":
        return qs.none()
    if filters.actor:
        # Retrievals are made by agents, so only an agent:<slug> actor can match.
        kind, _, slug = filters.actor.partition(":")
        if kind != "agent" or not slug:
            return qs.none()
        qs = qs.filter(agent__slug=slug)
    if filters.action and filters.action != RETRIEVAL_ACTION:
        return qs.none()
    qs = narrowed(qs, created_at__gte=filters.since, created_at__lt=filters.until)
    if filters.principal:
        qs = qs.filter(principal__in=_principals(project_ids, filters.principal))
    if filters.fact is not None:
        qs = qs.filter(pk__in=events_naming(filters.fact))
    return qs


def _after(qs: QuerySet[Any], rank: int, cursor: Cursor | None) -> QuerySet[Any]:
    """Rows strictly older than the cursor in (created_at, rank, id) descending order.

    The source rank is a constant per query, so the row comparison reduces to
    a bound on created_at (which the index walks) plus an id tie-break.
    """
    if cursor is None:
        return qs
    created_at, cursor_rank, row_id = cursor
    if rank < cursor_rank:
        return qs.filter(created_at__lte=created_at)
    if rank > cursor_rank:
        return qs.filter(created_at__lt=created_at)
    return qs.filter(created_at__lte=created_at).filter(
        Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=row_id)
    )


@dataclass(frozen=True)
class HistoryPage:
    items: list[HistoryItem]
    next_cursor: str | None


def scoped_project_ids(projects: QuerySet[Any], filters: HistoryFilters) -> list[int]:
    if filters.project:
        projects = projects.filter(slug=filters.project)
    return list(projects.values_list("pk", flat=True))


def history_page(
    projects: QuerySet[Any], filters: HistoryFilters, *, after: Cursor | None, limit: int
) -> HistoryPage:
    """Newest first; one keyset page over both sources (two index walks and a merge, no OFFSET)."""
    project_ids = scoped_project_ids(projects, filters)
    if not project_ids:
        return HistoryPage([], None)
    walks = []
    for source, qs in (
        (AUDIT, audit_entries(project_ids, filters)),
        (RETRIEVAL, retrieval_events(project_ids, filters)),
    ):
        rank = SOURCE_RANK[source]
        walks.append(
            _after(qs, rank, after)
            .annotate(rank=Value(rank))
            .order_by("-created_at", "-id")
            .values_list("created_at", "rank", "id")[: limit + 1]
        )
    # A source the filters rule out is an empty queryset, which union() would drop.
    walks = [walk for walk in walks if not isinstance(walk, EmptyQuerySet)]
    if not walks:
        return HistoryPage([], None)
    merged = (
        walks[0].union(*walks[1:], all=True).order_by("-created_at", "-rank", "-id")[: limit + 1]
        if len(walks) > 1
        else walks[0]
    )
    keys = list(merged)
    page, more = keys[:limit], len(keys) > limit
    audit_ids = [row_id for _, rank, row_id in page if rank == SOURCE_RANK[AUDIT]]
    event_ids = [row_id for _, rank, row_id in page if rank == SOURCE_RANK[RETRIEVAL]]
    by_key: dict[tuple[int, int], HistoryItem] = {}
    for row in AuditEntry.objects.filter(pk__in=audit_ids).values(*AUDIT_FIELDS):
        by_key[(SOURCE_RANK[AUDIT], row["id"])] = _audit_item(row)
    for row in RetrievalEvent.objects.filter(pk__in=event_ids).values(*RETRIEVAL_FIELDS):
        by_key[(SOURCE_RANK[RETRIEVAL], row["id"])] = _retrieval_item(row)
    items = [by_key[(rank, row_id)] for _, rank, row_id in page if (rank, row_id) in by_key]
    return HistoryPage(items, items[-1].cursor if more and items else None)


# What a row of each source is read as, for a page and for the export alike.
AUDIT_FIELDS = (
    "id",
    "project__slug",
    "sequence",
    "created_at",
    "actor",
    "action",
    "object_type",
    "object_id",
    "reason",
    "data",
    "request_id",
    "previous_hash",
    "entry_hash",
)
# The query and the injected context are memory text, not audit data: never read here.
RETRIEVAL_FIELDS = (
    "id",
    "project__slug",
    "created_at",
    "agent__slug",
    "principal__external_id",
    "session__external_id",
    "round",
    "mode",
    "identity_verified",
    "policy_version__version",
    "tokens_used",
    "token_budget",
    "candidate_count",
    "excluded_count",
    "reasons",
    "static_block_cached",
)


def _audit_item(row: dict[str, Any]) -> HistoryItem:
    """A history row from an audit entry's ``AUDIT_FIELDS``."""
    return HistoryItem(
        source=AUDIT,
        id=row["id"],
        created_at=row["created_at"],
        project=row["project__slug"] or "",
        actor=row["actor"],
        action=row["action"],
        object_type=row["object_type"],
        object_id=row["object_id"],
        reason=row["reason"],
        data=row["data"] if isinstance(row["data"], dict) else {"value": row["data"]},
        sequence=row["sequence"],
        request_id=row["request_id"],
        previous_hash=row["previous_hash"],
        entry_hash=row["entry_hash"],
    )


def _retrieval_item(row: dict[str, Any]) -> HistoryItem:
    """A history row from a retrieval event's ``RETRIEVAL_FIELDS``."""
    return HistoryItem(
        source=RETRIEVAL,
        id=row["id"],
        created_at=row["created_at"],
        project=row["project__slug"],
        actor=f"agent:{row['agent__slug']}",
        action=RETRIEVAL_ACTION,
        object_type="retrievalevent",
        object_id=str(row["id"]),
        data={
            "agent": row["agent__slug"],
            "session": row["session__external_id"],
            "round": row["round"],
            "mode": row["mode"],
            "identity_verified": row["identity_verified"],
            "policy_version": row["policy_version__version"],
            "tokens_used": row["tokens_used"],
            "token_budget": row["token_budget"],
            "candidates": row["candidate_count"],
            "excluded": row["excluded_count"],
            "reasons": row["reasons"],
            "static_block_cached": row["static_block_cached"],
        },
        principal=row["principal__external_id"],
    )


# --- Export: the same rows, oldest first, streamed -------------------------------

EXPORT_CHUNK = 2000


def _keyset_chunks(qs: QuerySet[Any], fields: tuple[str, ...], chunk_size: int) -> Iterator[dict[str, Any]]:
    """Every row of ``qs`` oldest first, read ``chunk_size`` rows per query.

    Each chunk is its own short query, resumed after the last row's
    (created_at, id): no transaction or cursor stays open while a slow client
    reads, so an export never holds a snapshot (or a connection's locks) for
    the length of a download. Memory stays flat however many rows match. The
    tables are append-only (R15), so no row is read twice or skipped; a row
    recorded while the export runs may be included.
    """
    ordered = qs.order_by("created_at", "id")
    after: tuple[datetime, int] | None = None
    while True:
        page = ordered
        if after is not None:
            page = page.filter(Q(created_at__gt=after[0]) | Q(created_at=after[0], id__gt=after[1]))
        rows = list(page.values(*fields)[:chunk_size])
        yield from rows
        if len(rows) < chunk_size:
            return
        after = (rows[-1]["created_at"], rows[-1]["id"])


def _audit_export_rows(qs: QuerySet[AuditEntry], chunk_size: int) -> Iterator[HistoryItem]:
    return map(_audit_item, _keyset_chunks(qs, AUDIT_FIELDS, chunk_size))


def _retrieval_export_rows(qs: QuerySet[RetrievalEvent], chunk_size: int) -> Iterator[HistoryItem]:
    return map(_retrieval_item, _keyset_chunks(qs, RETRIEVAL_FIELDS, chunk_size))


def export_items(
    projects: QuerySet[Any], filters: HistoryFilters, *, chunk_size: int = EXPORT_CHUNK
) -> Iterator[HistoryItem]:
    """Every matching row, oldest first: two keyset-paginated readers merged lazily.

    Call it outside a transaction: each chunk is a short query of its own.
    """
    project_ids = scoped_project_ids(projects, filters)
    if not project_ids:
        return iter(())
    return heapq.merge(
        _audit_export_rows(audit_entries(project_ids, filters), chunk_size),
        _retrieval_export_rows(retrieval_events(project_ids, filters), chunk_size),
        key=lambda item: (item.created_at, SOURCE_RANK[item.source], item.id),
    )


# --- Checking the chain --------------------------------------------------------------


def verify_chain(project_id: int | None = None) -> BrokenLink | None:
    """Walk each project's chain in order (or only ``project_id``'s); the first broken link, if any.

    Only sealed entries are in a chain: callers seal first (``services.audit.seal``)
    and report what was still waiting (``services.audit.backlog``)."""
    projects = (
        [project_id]
        if project_id is not None
        else list(AuditEntry.objects.order_by().values_list("project_id", flat=True).distinct())
    )
    for pid in sorted(projects, key=lambda p: (p is None, p or 0)):
        chain = (
            AuditEntry.objects.filter(project_id=pid, sequence__isnull=False)
            .order_by("sequence")
            .iterator(chunk_size=2000)
        )
        broken = first_broken_link(pid, chain)
        if broken is not None:
            return broken
    return None
