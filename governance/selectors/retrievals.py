"""Reads for retrieval: the candidate query, and the retrieval log for people."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

import numpy
from django.db import connection
from django.db.models import Q, QuerySet

from governance import prepared, rls
from governance.models import (
    Agent,
    CandidateRecord,
    Fact,
    PolicyVersion,
    Principal,
    Project,
    RetrievalEvent,
    Session,
    SessionBlock,
)
from governance.models.facts import vector_text
from governance.models.retrievals import decode_candidates, events_naming
from governance.models.writes import ReviewAction
from governance.rules.contradictions import CONFLICT_REVIEW_PREFIX, NO_RULINGS, PairRulings, rulings_from
from governance.rules.policy import BOUNDS as POLICY_BOUNDS
from governance.rules.policy import PolicySettings
from governance.rules.retrieval import (
    CANDIDATE_COLUMNS,
    STANDING,
    Candidate,
    age_in_days,
    freshness_tier,
    standing_bounds,
    stands,
)
from governance.selectors import cursors
from governance.selectors.facts import active_memories
from governance.selectors.pages import narrowed

# How much history of non-active facts an event explains per retrieval: the
# newest ones are enough to say why a superseded or withdrawn fact was not used.
INACTIVE_HISTORY_LIMIT = 200
NEAREST_LIMIT_MIN = 50

CANDIDATE_FIELDS = ("id", *CANDIDATE_COLUMNS)


# The positions _to_candidates unpacks: a change to the columns must change it too.
assert (
    *("id", "kind", "key", "statement", "status", "principal_id", "source_type", "source_ref"),
    *("authority", "confidence", "valid_from", "valid_to", "last_verified_at"),
) == CANDIDATE_FIELDS

# A row of the candidate read: the candidate's columns, its stored claims
# (``Candidate.stored_claims``), when its status last changed (the history
# part's order; NULL in the other parts), its distance to the query, and its part.
ROW_FIELDS = (*CANDIDATE_FIELDS, "claims", "status_changed_at", "distance", "part")
# Where each column sits in a row (``stands`` reads a cached row by these).
POSITIONS = {name: position for position, name in enumerate(ROW_FIELDS)}
_ID, _KIND = POSITIONS["id"], POSITIONS["kind"]
_CHANGED, _DISTANCE, _PART = POSITIONS["status_changed_at"], POSITIONS["distance"], POSITIONS["part"]

Row = tuple[Any, ...]


def _to_candidates(rows: Iterable[Row]) -> list[Candidate]:
    """``candidate_from_columns`` by position: no mapping per row (thousands for a large principal)."""
    instant = _instant_reader()
    candidates = []
    for row in rows:
        _id, kind, key, statement, status, principal_id, source_type, source_ref = row[:8]
        authority, confidence, valid_from, valid_to, last_verified_at, stored_claims = row[8:_CHANGED]
        if valid_from is not None:
            valid_from = instant(valid_from)
        if valid_to is not None:
            valid_to = instant(valid_to)
        last_verified_at = instant(last_verified_at)
        distance = row[_DISTANCE]
        candidates.append(
            Candidate(
                fact_id=_id,
                kind=kind,
                key=key,
                statement=statement,
                status=status,
                is_project_fact=principal_id is None,
                source_type=source_type,
                source_ref=source_ref,
                authority=authority,
                confidence=confidence,
                valid_from=valid_from,
                valid_to=valid_to,
                last_verified_at=last_verified_at,
                relevance=None if distance is None else max(0.0, 1.0 - float(distance)),
                stored_claims=stored_claims,
            )
        )
    return candidates


# The candidate read sends these times as whole microseconds since 1970 (the
# cached project rows hold them as read by the ORM): turning ~2,500 of them into
# datetimes takes a fraction of parsing their text (~7 microseconds each) for a
# large principal (issue 13). Exact: PostgreSQL stores microseconds, and
# EXTRACT gives a numeric.
_INSTANTS = ("valid_from", "valid_to", "last_verified_at")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _instant_reader() -> Callable[[Any], datetime]:
    """A datetime from the read's microseconds (a datetime stays as it is), in Django's zone for reads."""
    zone = connection.timezone

    def instant(value: Any) -> datetime:
        if value.__class__ is not int:
            return cast(datetime, value)
        moment = _EPOCH + timedelta(microseconds=value)
        return moment if zone is UTC else moment.astimezone(zone)

    return instant


def _microseconds(moment: datetime) -> int:
    """``moment`` as the candidate read sends a time: whole microseconds since 1970."""
    return (moment - _EPOCH) // _MICROSECOND


_MICROSECOND = timedelta(microseconds=1)


def _nearest_kinds(policy: PolicySettings) -> list[str]:
    return [k for k in policy.per_round_kinds if k != "slot"]


def _nearest_limit(policy: PolicySettings) -> int:
    # Clamped as well as validated: a version stored before max_items had a
    # bound must not overflow the query's LIMIT (bigint) on every retrieval.
    max_items = min(policy.max_items, int(POLICY_BOUNDS["max_items"][1]))
    return max(NEAREST_LIMIT_MIN, max_items * 3)


# --- The candidate read: one statement, written out ------------------------
#
# Up to four parts joined by UNION ALL, each with its own order and limit
# (``candidates`` says which). Written as SQL once rather than composed through
# the ORM on every retrieval, where composing it was a large share of a small
# principal's round. It names governance_fact, so the row-level-security
# wrapper (governance/rls.py) sets the project scope before it like any other
# read (tests/governance/selectors/test_retrievals.py checks it).

_SQL_TESTS = {
    "=": "{column} = {bound}",
    "in": "{column} = ANY({bound})",
    ">=": "{column} >= {bound}",
    ">": "{column} > {bound}",
    "<=": "{column} <= {bound}",
}


def _standing_sql() -> str:
    """rules.retrieval.STANDING in SQL, its bounds as named parameters (``standing_bounds``' keys).

    The columns whose NULL does not pass are NOT NULL in the table, so the
    expression is never unknown and its negation is exactly what does not stand.
    """
    tests = []
    for condition in STANDING:
        column = f"f.{condition.column}"
        test = _SQL_TESTS[condition.operator].format(column=column, bound=f"%({condition.bound})s")
        tests.append(f"({column} IS NULL OR {test})" if condition.null_passes else test)
    return "(" + " AND ".join(tests) + ")"


STANDING_SQL = _standing_sql()

# The candidate's columns as the read sends them, its times as microseconds (``_instant_reader``).
_CANDIDATE_VALUES = [
    f"(EXTRACT(EPOCH FROM f.{name}) * 1000000)::int8" if name in _INSTANTS else f"f.{name}"
    for name in CANDIDATE_FIELDS
]
# The same as columns of a select list, each named as in ROW_FIELDS (``_LATER_PART`` reads them by name).
_CANDIDATE_SQL = [
    f"{value} AS {name}" if name in _INSTANTS else value
    for name, value in zip(CANDIDATE_FIELDS, _CANDIDATE_VALUES, strict=True)
]
# Only the history part is ordered by when a status changed (``_merge`` too), in
# microseconds like the other times (psycopg parsed ~50 timestamps a first round
# here, ~7 microseconds each); the other parts leave it out.
_CHANGED_SQL = "(EXTRACT(EPOCH FROM f.status_changed_at) * 1000000)::int8 AS status_changed_at"
_COLUMNS = ", ".join([*_CANDIDATE_SQL, "f.claims", _CHANGED_SQL])
_COLUMNS_UNCHANGED = ", ".join([*_CANDIDATE_SQL, "f.claims", "NULL::int8 AS status_changed_at"])
_DISTANCE_SQL = {True: "f.embedding <=> %(query)s::vector", False: "NULL::float8"}

# R1: whose facts a part reads (``candidates`` picks one). ``{principal}`` and
# ``{session}`` (in the slot part) are the SQL that gives their ids: a
# parameter in the candidate read, the header's own columns in ``_LATER_PART``.
_SCOPES = {
    "own": "f.project_id = %(project)s AND f.principal_id = {principal} AND f.session_id IS NULL",
    "own_and_shared": (
        "f.project_id = %(project)s AND (f.principal_id = {principal} OR f.principal_id IS NULL)"
        " AND f.session_id IS NULL"
    ),
    "shared": "f.project_id = %(project)s AND f.principal_id IS NULL AND f.session_id IS NULL",
}
# The history part of the "own" scope names the principal alone. Its id was looked up
# within the agent's project (the header), so it implies the project, and row-level
# security confines the read to that project all the same. Named together, PostgreSQL
# multiplies the two columns' selectivities as if they were independent, takes the
# largest principal's 8,107 facts for ~940 and sorts them all rather than walk
# fact_principal_changed_idx newest change first and stop at the limit (migration 0048).
_HISTORY_SCOPES = {**_SCOPES, "own": "f.principal_id = {principal} AND f.session_id IS NULL"}

_PARTS = {
    # Static memory that could be injected, all of it.
    "static": (
        "(SELECT {unchanged}, {distance} AS distance, 'static' AS part FROM governance_fact f"
        " WHERE {scope} AND f.kind <> 'slot' AND {standing} AND NOT f.kind = ANY(%(per_round_kinds)s)"
        " ORDER BY f.id)"
    ),
    # The newest facts that could not, so the event says why (R14).
    "history": (
        "(SELECT {columns}, {distance} AS distance, 'history' AS part FROM governance_fact f"
        " WHERE {scope} AND f.kind <> 'slot' AND NOT {standing}"
        " ORDER BY f.status_changed_at DESC, f.id DESC LIMIT %(history_limit)s)"
    ),
    # Per-round kinds nearest to the query, among facts that could be injected:
    # an exact distance over the principal's scoped rows (an HNSW index with a
    # selective principal filter loses recall, issue 4).
    "nearest": (
        "(SELECT {unchanged}, {distance} AS distance, 'nearest' AS part FROM governance_fact f"
        " WHERE {scope} AND {standing} AND f.kind = ANY(%(nearest_kinds)s) AND f.embedding IS NOT NULL"
        " ORDER BY distance, f.id LIMIT %(nearest_limit)s)"
    ),
    # This session's slots. The principal too, not only the session: a session
    # first seen without a principal has none pinned, and its slots must still
    # reach only the person they are about (R1).
    "slot": (
        "(SELECT {unchanged}, {distance} AS distance, 'slot' AS part FROM governance_fact f"
        " WHERE f.project_id = %(project)s AND f.session_id = {session}"
        " AND f.principal_id = {principal} AND f.kind = 'slot' ORDER BY f.id)"
    ),
}

PART_ORDER = tuple(_PARTS)


def _part_sql(part: str, scope: str, with_query: bool, *, principal: str, session: str) -> str:
    return _PARTS[part].format(
        columns=_COLUMNS,
        unchanged=_COLUMNS_UNCHANGED,
        distance=_DISTANCE_SQL[with_query],
        scope=(_HISTORY_SCOPES if part == "history" else _SCOPES)[scope].format(principal=principal),
        standing=STANDING_SQL,
        principal=principal,
        session=session,
    )


@functools.cache
def candidate_statement(parts: tuple[str, ...], scope: str, with_query: bool) -> str:
    """The candidate read for these parts (in PART_ORDER), scope (a key of _SCOPES) and query."""
    return " UNION ALL ".join(
        _part_sql(part, scope, with_query, principal="%(principal)s", session="%(session)s") for part in parts
    )


@dataclass
class Opening:
    """A new session's INSERT, sent with the candidate read (``candidates(opening=...)``).

    ``sql`` inserts the session unless its (agent, external id) is taken and
    returns its id; ``values`` are its named values. After the read, ``sent``
    says whether it went, and ``session_id`` what it returned (None: taken).
    """

    sql: str
    values: dict[str, Any]
    sent: bool = False
    session_id: int | None = None


# The inserted session's id, as a row of the read: its id in the id column,
# NULL in the others (typed by the parts before it), "opened" as its part.
_OPENED_PART = "(SELECT opened.id" + ", NULL" * (len(ROW_FIELDS) - 2) + ", 'opened' AS part FROM opened)"


def later_round_parts(policy: PolicySettings, with_query: bool) -> tuple[str, ...]:
    """The parts a later round that reuses its start block reads of its principal's
    rows (``candidates(session_start=False)`` with the project facts cached)."""
    return (*(("nearest",) if _nearest_kinds(policy) and with_query else ()), "slot")


def later_round_params(
    policy: PolicySettings, query_vector: Sequence[float] | None, now: datetime
) -> dict[str, Any]:
    """The values ``later_round_parts`` read with, besides the project (``retrieval_header``)."""
    return {
        **standing_bounds(policy, now),
        "query": vector_text(query_vector) if query_vector is not None else None,
        "nearest_kinds": _nearest_kinds(policy),
        "nearest_limit": _nearest_limit(policy),
    }


def candidates(
    project: Project,
    principal: Principal | None,
    session: Session | None,
    policy: PolicySettings,
    query_vector: Sequence[float] | None,
    *,
    now: datetime,
    session_start: bool,
    facts_generation: int | None = None,
    plan_once: bool = True,
    later_rows: Sequence[Row] | None = None,
    opening: Opening | None = None,
) -> list[Candidate]:
    """Every candidate of a retrieval (step 3), in one statement.

    Always the per-round kinds nearest to the query, among eligible facts, and
    this session's slots. With ``session_start`` (the session-start block is
    computed, not reused: R12) first also

    - static memory (every kind that is not per-round) that could be injected,
      all of it, ordered by id;
    - the newest facts that could not (other statuses, kinds, validity,
      authority or age), so the event can say why they were not used (R14),
      at most INACTIVE_HISTORY_LIMIT of them.

    With ``facts_generation`` (the project's, read in this retrieval's
    transaction: ``retrieval_header``) the project's principal-less facts come
    from the process cache and the statement reads only the principal's; the
    parts are merged as the one statement would have ordered and cut them.

    With ``plan_once`` the statement is a prepared one (``governance.prepared``);
    without, it is planned for this principal's values (``RetrievalHeader.few_facts``).

    ``later_rows``: what the statement would read for a later round
    (``RetrievalHeader.later_rows``, read in the same transaction with the
    same policy, query and moment); with them, and the project facts cached,
    a later round sends no statement.

    ``opening``: ``session`` is new and not stored yet; its INSERT
    (``services.sessions.opening_statement``) goes in front of the read, as
    a WITH clause, and what it returned is kept on ``opening``. A session
    this transaction is inserting has no slots, so none are read. Without a
    statement to send (nothing of the principal's to read), nothing is sent
    and ``opening.sent`` stays False.
    """
    cached = facts_generation is not None
    read_rows = principal is not None or not cached
    nearest_kinds = _nearest_kinds(policy)
    parts: list[str] = []
    if session_start and read_rows:
        parts += ["static", "history"]
    if read_rows and nearest_kinds and query_vector is not None:
        parts.append("nearest")
    if session is not None and principal is not None and opening is None:
        parts.append("slot")
    rows: list[Row] = []
    if later_rows is not None and cached and not session_start:
        assert principal is not None and session is not None, "the header read them for both"
        assert opening is None, "a later round's header found its session"
        rows = list(later_rows)
    elif parts:
        scope = "own" if cached else "own_and_shared" if principal is not None else "shared"
        params = {
            **standing_bounds(policy, now),
            "project": project.pk,
            "principal": principal.pk if principal is not None else None,
            "session": session.pk if session is not None and opening is None else None,
            "query": vector_text(query_vector) if query_vector is not None else None,
            "per_round_kinds": list(policy.per_round_kinds),
            "nearest_kinds": nearest_kinds,
            "history_limit": INACTIVE_HISTORY_LIMIT,
            "nearest_limit": _nearest_limit(policy),
        }
        statement = candidate_statement(tuple(parts), scope, query_vector is not None)
        if opening is not None:
            statement = f"WITH opened AS ({opening.sql}) {statement} UNION ALL {_OPENED_PART}"
            params.update(opening.values)
        with connection.cursor() as cursor:
            if plan_once:
                prepared.execute(cursor, statement, params)
            else:
                cursor.execute(statement, params)
            rows = cursor.fetchall()
        if opening is not None:
            opening.sent = True
            opened = [row for row in rows if row[_PART] == "opened"]
            opening.session_id = opened[0][_ID] if opened else None
            rows = [row for row in rows if row[_PART] != "opened"]
        if len(parts) > 1:
            # A UNION ALL promises no order across its parts; the caller's order is the parts' order.
            order = {name: position for position, name in enumerate(PART_ORDER)}
            rows.sort(key=lambda row: order[row[_PART]])
    if cached:
        assert facts_generation is not None
        rows = _merge(
            rows, project_facts(project.pk, facts_generation), policy, query_vector, now, session_start
        )
    return _to_candidates(rows)


# --- Project facts: kept in process per project and generation -----------------
#
# Every retrieval in a project sees its principal-less facts, so reading them
# each time repeats the same rows. They are kept here under the project's
# facts generation, which a trigger moves in the transaction of every change
# to any of them (migration 0039) and which every retrieval reads afresh
# (``retrieval_header``): a changed, withdrawn or superseded project fact has
# a new generation before anyone can see the change, so the old rows are never
# served again. Eligibility, distances and order are worked out per retrieval,
# as the statement would have: the cached rows are the facts, not a decision.
# The TTL only bounds memory held for projects no longer used.

PROJECT_FACTS_TTL = 300.0  # seconds
PROJECT_FACTS_MAX_PROJECTS = 512


@dataclass(frozen=True)
class _ProjectFacts:
    rows: tuple[Row, ...]  # ROW_FIELDS without distance and part, by id
    vectors: Any  # numpy (n, dims) of the rows with an embedding, unit length
    with_vector: tuple[int, ...]  # the positions in ``rows`` of those vectors
    loaded: float


_project_facts: dict[tuple[int, int], _ProjectFacts] = {}
_project_facts_lock = threading.Lock()


def project_facts(project_id: int, generation: int) -> _ProjectFacts:
    """The project's principal-less facts as of ``generation`` (one read when not cached)."""
    key = (project_id, generation)
    clock = time.monotonic()
    with _project_facts_lock:
        entry = _project_facts.get(key)
    if entry is not None and clock - entry.loaded < PROJECT_FACTS_TTL:
        return entry
    found = list(
        Fact.objects.filter(project_id=project_id, principal__isnull=True, session__isnull=True)
        .exclude(kind="slot")
        .order_by("id")
        .values_list(*CANDIDATE_FIELDS, "claims", "status_changed_at", "embedding")
    )
    with_vector = tuple(i for i, row in enumerate(found) if row[-1] is not None)
    vectors = numpy.array([found[i][-1] for i in with_vector], dtype=numpy.float64)
    if len(with_vector):
        norms = numpy.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = numpy.divide(vectors, norms, out=numpy.zeros_like(vectors), where=norms > 0)
    entry = _ProjectFacts(
        # status_changed_at in microseconds, as the candidate read sends it (``_merge`` sorts both together).
        rows=tuple((*row[:_CHANGED], _microseconds(row[_CHANGED])) for row in found),
        vectors=vectors,
        with_vector=with_vector,
        loaded=clock,
    )
    if not _sees_the_whole_project(project_id):
        return entry  # rows narrowed by row-level security are no one else's to reuse
    with _project_facts_lock:
        if len(_project_facts) >= PROJECT_FACTS_MAX_PROJECTS:
            _project_facts.clear()
        # Only retrievals that began before a change still ask for an older generation.
        for stale in [k for k in _project_facts if k[0] == project_id]:
            del _project_facts[stale]
        _project_facts[key] = entry
    return entry


def _sees_the_whole_project(project_id: int) -> bool:
    """Whether this work's row-level security scope lets it read every fact of the project."""
    setting = rls.current().setting()
    return setting == rls.EVERY_PROJECT or str(project_id) in setting.split(",")


def forget_project_facts() -> None:
    """Empty the process cache (tests, whose databases reuse project ids)."""
    with _project_facts_lock:
        _project_facts.clear()


def _distances(facts: _ProjectFacts, query_vector: Sequence[float] | None) -> list[float | None]:
    """Cosine distance of each cached row to the query, as pgvector's ``<=>`` gives it."""
    distances: list[float | None] = [None] * len(facts.rows)
    if query_vector is None or not facts.with_vector:
        return distances
    query = numpy.asarray(query_vector, dtype=numpy.float64)
    norm = float(numpy.linalg.norm(query))
    if norm == 0:
        return distances  # pgvector answers NaN; no query relevance either way
    similarities = facts.vectors @ (query / norm)
    for position, similarity in zip(facts.with_vector, similarities.tolist(), strict=True):
        distances[position] = 1.0 - similarity
    return distances


def _merge(
    rows: list[Row],
    facts: _ProjectFacts,
    policy: PolicySettings,
    query_vector: Sequence[float] | None,
    now: datetime,
    session_start: bool,
) -> list[Row]:
    """The principal's rows and the cached project rows, in the parts, orders and limits of ``candidates``."""
    distances = _distances(facts, query_vector)
    parts: dict[str, list[Row]] = {name: [] for name in PART_ORDER}
    for row in rows:
        parts[row[_PART]].append(row)
    nearest_kinds = set(_nearest_kinds(policy))
    per_round = set(policy.per_round_kinds)
    bounds = standing_bounds(policy, now)
    for row, distance in zip(facts.rows, distances, strict=True):
        nearest = row[_KIND] in nearest_kinds and distance is not None and query_vector is not None
        if not session_start and not nearest:
            continue  # a later round takes only the nearest part: no need to test the rest
        eligible = stands(row, POSITIONS, bounds)
        if eligible and nearest:
            parts["nearest"].append((*row, distance, "nearest"))
        if not session_start:
            continue
        if eligible and row[_KIND] not in per_round:
            parts["static"].append((*row, distance, "static"))
        elif not eligible:
            parts["history"].append((*row, distance, "history"))
    parts["static"].sort(key=lambda row: row[_ID])
    parts["history"].sort(key=lambda row: (row[_CHANGED], row[_ID]), reverse=True)
    del parts["history"][INACTIVE_HISTORY_LIMIT:]
    parts["nearest"].sort(key=lambda row: (row[_DISTANCE], row[_ID]))
    del parts["nearest"][_nearest_limit(policy) :]
    return [row for name in PART_ORDER for row in parts[name]]


@dataclass(frozen=True)
class EndedSession:
    """A session of the principal that ended: where R9's resume hint comes from (``retrieval_header``)."""

    pk: int
    resume_hint: str
    resume_hint_held: bool
    summary_status: str | None  # the summary fact's, None without one
    summary_ref: str | None
    summary_authority: int | None
    external_id: str
    ended_at: datetime | None


@dataclass(frozen=True)
class RetrievalHeader:
    """What a retrieval reads first, in one statement (``retrieval_header``)."""

    principal: Principal | None  # None: not named, or not seen before
    # The principal's newest active fact's verification (R9), unless not read
    # (``newest_read``: a header that reads the cached block leaves it out).
    newest_verified: datetime | None
    facts_generation: int  # the project's facts generation (the project-fact cache's key)
    # Reviewers' rulings on pairs of this principal's and the project's facts (``conflict_rulings``).
    rulings: PairRulings = NO_RULINGS
    # Read only when asked for (``session``): whether the session was looked up
    # (locked), and what was found (None: no such session of the agent).
    session_read: bool = False
    session: Session | None = None
    # Read only when asked for (``ended_sessions``): the principal's two latest
    # ended sessions, newest first (two: the retrieval's own may be one of them).
    ended_sessions: tuple[EndedSession, ...] | None = None
    # Read only when asked for (``block``): the session's cached start block
    # under this key and its facts in scope, as ``cached_block`` reads them.
    block: tuple[SessionBlock | None, list[Candidate]] | None = None
    newest_read: bool = True
    # Whether the principal has at most PREPARED_CANDIDATES_UP_TO facts (or is
    # new): ``candidates(plan_once=...)``.
    few_facts: bool = True
    # Read only when asked for (``later_round``) and the principal has few
    # facts: the principal's rows a later round reusing its start block takes
    # (``candidates(later_rows=...)``), in the candidate read's part order.
    later_rows: list[Row] | None = None

    @property
    def last_interaction(self) -> datetime | None:
        """R9: the later of their last session and their newest fact's verification."""
        assert self.newest_read or self.principal is None, "read with newest_verification first"
        last_seen = self.principal.last_seen_at if self.principal is not None else None
        seen = [t for t in (last_seen, self.newest_verified) if t is not None]
        return max(seen) if seen else None


# Pairs of facts reviewers ruled on, or are asked to (services/conflicts.py opens
# those reviews): waiting for a reviewer, or kept both. ``{project}`` and
# ``{principal}`` are the SQL that gives their ids.
_RULINGS_FROM = (
    "FROM governance_write w WHERE w.project_id = {project} AND w.source_ref LIKE %(conflict_review)s"
    " AND w.fact_id IS NOT NULL AND w.conflicts_with_id IS NOT NULL"
    " AND (w.principal_id = {principal} OR w.principal_id IS NULL)"
    " AND (w.status = 'pending_review' OR EXISTS (SELECT 1 FROM governance_reviewdecision d"
    " WHERE d.write_id = w.id AND d.action = %(keep_both)s))"
)
_RULINGS = "SELECT w.fact_id, w.conflicts_with_id, w.status = 'pending_review' " + _RULINGS_FROM.format(
    project="%(project)s", principal="%(principal)s"
)
_RULINGS_PARAMS = {
    "conflict_review": CONFLICT_REVIEW_PREFIX.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")
    + "%",
    "keep_both": ReviewAction.KEEP_BOTH.value,
}


def conflict_rulings(project_id: int, principal_id: int | None) -> PairRulings:
    """Pairs a reviewer kept both of, and pairs waiting for one (one query).

    Of this principal's facts and the project's; of the project's alone without a principal.
    """
    with connection.cursor() as cursor:
        cursor.execute(_RULINGS, {**_RULINGS_PARAMS, "project": project_id, "principal": principal_id})
        return rulings_from(cursor.fetchall())


# R9's other input: the principal's newest active fact's verification.
_NEWEST_FROM = (
    "FROM governance_fact f WHERE f.project_id = {project} AND f.principal_id = {principal}"
    " AND f.status = 'active'"
)
_NEWEST = "SELECT MAX(f.last_verified_at) " + _NEWEST_FROM.format(project="%s", principal="%s")
# The candidate read is a prepared statement (governance.prepared), and
# PostgreSQL soon keeps one generic plan for it. That plan is as fast as a
# custom one for a principal of up to about a thousand facts, and up to twice
# as slow past it (index scans in index order over thousands of rows where a
# custom plan scans the heap in its order; docs/performance.md, "Prepared
# statements"). So the header says, counting at most that many index entries,
# whether the principal's candidates may be read with the prepared statement.
PREPARED_CANDIDATES_UP_TO = 1000
_FEW_FACTS_JOIN = (
    f"\n  CROSS JOIN LATERAL (SELECT count(*) <= {PREPARED_CANDIDATES_UP_TO} AS few FROM (SELECT FROM"
    " governance_fact f WHERE f.project_id = x.project_id AND f.principal_id = p.id"
    f" LIMIT {PREPARED_CANDIDATES_UP_TO + 1}) counted) n"
)
_HEADER = f"""
SELECT COALESCE(g.generation, 0), p.id, p.created_at, p.last_seen_at, {{newest}},
       (SELECT array_agg(ARRAY[w.fact_id, w.conflicts_with_id, (w.status = 'pending_review')::int])
         {_RULINGS_FROM.format(project="x.project_id", principal="p.id")}), n.few{{columns}}
  FROM (SELECT %(project)s::bigint AS project_id) x
  LEFT JOIN governance_projectfactsgeneration g ON g.project_id = x.project_id
  LEFT JOIN governance_principal p ON p.project_id = x.project_id AND p.external_id = %(external_id)s\
{_FEW_FACTS_JOIN}{{joins}}
"""
_HEADER_WIDTH = 7

# A later round that reuses its start block reads of its principal's rows only
# the parts ``later_round_parts`` names, which a prepared statement reads as
# fast as one planned for the values when the principal has few facts. For
# such a principal the header reads them too, each part as one JSON array of
# candidate rows (as ``_BLOCK_SELECT`` sends the block's facts), and the round
# has no candidate read of its own: one round trip fewer (issue 13). NULL for
# a principal with more facts, whose parts the candidate read plans for them.
_LATER_PART = """
       CASE WHEN n.few THEN (SELECT COALESCE(json_agg(json_build_array({fields}) ORDER BY {order}), '[]')
         FROM {part} r) END"""
_LATER_ORDER = {"nearest": "r.distance, r.id", "slot": "r.id"}

# The session the retrieval names, locked as ``open_session(lock=True)`` locks it:
# a locking clause in a sub-select locks that sub-select's rows.
# Every column, in the model's order (``Model.from_db`` takes them so).
_SESSION_FIELDS = tuple(str(f.column) for f in Session._meta.concrete_fields)
_SESSION_JOIN = f"""
  LEFT JOIN LATERAL (SELECT {", ".join(_SESSION_FIELDS)} FROM governance_session
    WHERE agent_id = %(agent)s AND external_id = %(session)s FOR UPDATE) s ON true"""

# R9's resume hint comes from the principal's latest ended session other than
# the retrieval's own (services.retrievals._resume_hint): two rows are enough.
_ENDED_FIELDS = (
    *("h.id", "h.resume_hint", "h.resume_hint_held", "hf.status", "hf.source_ref", "hf.authority"),
    *("h.external_id", "h.ended_at"),
)
_ENDED_SELECT = f"""SELECT {", ".join(_ENDED_FIELDS)} FROM governance_session h
    LEFT JOIN governance_fact hf ON hf.id = h.summary_fact_id
    WHERE h.principal_id = {{principal}} AND h.ended_at IS NOT NULL
    ORDER BY h.ended_at DESC, h.id DESC LIMIT 2"""
_ENDED_JOIN = f"""
  LEFT JOIN LATERAL ({_ENDED_SELECT.format(principal="p.id")}) h ON true"""


def ended_sessions(principal: Principal) -> tuple[EndedSession, ...]:
    """The principal's two latest ended sessions, newest first (``RetrievalHeader.ended_sessions``)."""
    with connection.cursor() as cursor:
        cursor.execute(_ENDED_SELECT.format(principal="%s"), [principal.pk])
        return tuple(EndedSession(*row) for row in cursor.fetchall())


# The session's cached start block under its key (R12) and its facts by
# primary key, within the retrieval's scope (R1): a fact that left it is not found.
# One row: the facts come as one JSON array of candidate rows (ROW_FIELDS, their
# times as microseconds, as the candidate read sends them), so the block's
# columns (and, in the header, the principal's and the session's) are not sent
# and parsed again for each fact.
_BLOCK_FIELDS = ("id", "mode", "text", "tokens", "fact_ids", "items", "hint_session_id", "created_at")
_BLOCK_FACT = ", ".join([*_CANDIDATE_VALUES, "f.claims", "NULL", "NULL", "'block'"])
_BLOCK_SELECT = f"""
SELECT {", ".join(f"b.{name}" for name in _BLOCK_FIELDS)},
       (SELECT json_agg(json_build_array({_BLOCK_FACT})) FROM governance_fact f
         WHERE f.id = ANY(b.fact_ids) AND f.project_id = {{project}}
           AND f.session_id IS NULL AND (f.principal_id IS NULL OR f.principal_id = {{principal}}))
  FROM governance_sessionblock b
 WHERE b.session_id = {{session}} AND b.principal_id IS NOT DISTINCT FROM {{principal}}
   AND b.identity_verified = {{verified}} AND b.policy_version_id = {{version}}
"""
_BLOCK_WIDTH = len(_BLOCK_FIELDS) + 1  # the block's columns and its facts
_BLOCK = _BLOCK_SELECT.format(project="%s", principal="%s", session="%s", verified="%s", version="%s")
# LIMIT 1 changes no answer (the four columns are session_block_key_unique's) but
# keeps the sub-select from being pulled up into the header's join. Pulled up, a
# generic plan made while the table was nearly empty (a new database, or a new
# deployment's first rounds) scanned every block of the table and built each one's
# facts before the join kept the session's: after make bench's seed a later round's
# header took 2.2 ms where it now takes 0.8, over a connection's first 64 uses, more
# as blocks accumulated (docs/performance.md, "the header's block kept to its key").
_BLOCK_JOIN = (
    "\n  LEFT JOIN LATERAL ("
    + _BLOCK_SELECT.format(
        project="x.project_id",
        principal="p.id",
        session="s.id",
        verified="%(identity_verified)s",
        version="%(version)s",
    )
    + " LIMIT 1) b ON true"
)


@functools.cache
def header_statement(
    session: bool, ended_sessions: bool, block: bool, later: tuple[str, ...] = (), with_query: bool = False
) -> str:
    """The header read, with the session, the ended sessions or the cached block
    joined as asked, and the ``later`` parts of a later round's candidates."""
    # Each joined sub-select's columns in its own order (``retrieval_header`` reads them by position).
    columns: list[str] = []
    joins: list[str] = []
    if session:
        columns.append("s.*")
        joins.append(_SESSION_JOIN)
    if ended_sessions:
        columns.append("h.*")
        joins.append(_ENDED_JOIN)
    if block:
        assert session, "a block is looked up by its session"
        columns.append("b.*")
        joins.append(_BLOCK_JOIN)
    for part in later:
        assert block, "only a later round reading its block reads its candidates here"
        part_sql = _part_sql(part, "own", with_query, principal="p.id", session="s.id")
        fields = ", ".join(f"r.{name}" for name in ROW_FIELDS)
        columns.append(_LATER_PART.format(fields=fields, order=_LATER_ORDER[part], part=part_sql))
    # A later round that finds its block reusable, as most do, works out no
    # session mode: the session has its own, and without the aggregate the
    # statement is planned in less time (``newest_verification`` reads it when needed).
    newest = (
        "NULL::timestamptz"
        if block
        else "(SELECT MAX(f.last_verified_at) "
        + _NEWEST_FROM.format(project="x.project_id", principal="p.id")
        + ")"
    )
    return _HEADER.format(newest=newest, columns="".join(f", {c}" for c in columns), joins="".join(joins))


def newest_verification(project_id: int, principal_id: int) -> datetime | None:
    """The principal's newest active fact's verification (R9), as the header reads it."""
    with connection.cursor() as cursor:
        cursor.execute(_NEWEST, [project_id, principal_id])
        return cast(datetime | None, cursor.fetchone()[0])


def retrieval_header(
    project: Project,
    external_id: str | None,
    *,
    agent: Agent | None = None,
    session: str | None = None,
    ended_sessions: bool = False,
    block_key: tuple[bool, PolicyVersion] | None = None,
    later_round: tuple[PolicySettings, Sequence[float] | None, datetime] | None = None,
) -> RetrievalHeader:
    """The principal named ``external_id``, their newest verification, the rulings and the facts generation.

    One statement where four were sent (the principal, the aggregate for R9's
    session mode through the (project, principal, status, last_verified_at)
    index, the generation, and the reviewers' rulings on pairs of their facts:
    ``conflict_rulings`` for the principal the header finds, or for none).
    Read inside the retrieval's transaction, before its candidates: the cached
    project facts can be no older than the state the generation names.

    The same statement, when asked, also reads what a retrieval would otherwise
    read in statements of its own: the agent's ``session`` by its external id,
    locked (``open_session`` takes it from there); the principal's latest ended
    sessions (``ended_sessions``, for R9's resume hint); and with ``block_key``
    (identity verified, policy version) the session's cached start block with
    its facts (``cached_block``). With the block, ``later_round`` (the policy,
    the query's vector and the moment judged at) also has it read the round's
    own candidates of a principal with few facts (``_LATER_PART``:
    ``RetrievalHeader.later_rows``).
    """
    if session is not None:
        assert agent is not None, "a session is the agent's"
    with_session = session is not None
    with_block = with_session and block_key is not None
    params: dict[str, Any] = {**_RULINGS_PARAMS, "project": project.pk, "external_id": external_id}
    if with_session:
        assert agent is not None
        params.update(agent=agent.pk, session=session)
    if with_block:
        assert block_key is not None
        params.update(identity_verified=block_key[0], version=block_key[1].pk)
    later: tuple[str, ...] = ()
    with_query = False
    if with_block and later_round is not None:
        policy, query_vector, now = later_round
        with_query = query_vector is not None
        later = later_round_parts(policy, with_query)
        params.update(later_round_params(policy, query_vector, now))
    statement = header_statement(with_session, ended_sessions, with_block, later, with_query)
    with connection.cursor() as cursor:
        prepared.execute(cursor, statement, params)
        rows = cursor.fetchall()
    generation, principal_id, created_at, last_seen_at, newest, rulings, few_facts = rows[0][:_HEADER_WIDTH]
    principal = None
    if principal_id is not None:
        assert external_id is not None
        principal = Principal.from_row(
            project, principal_id, external_id, created_at, last_seen_at, using=connection.alias
        )
    at = _HEADER_WIDTH
    found = None
    if with_session:
        values = rows[0][at : at + len(_SESSION_FIELDS)]
        if values[0] is not None:
            assert agent is not None
            found = Session.from_db(connection.alias, list(_SESSION_FIELDS), list(values))
            # The session is this agent's, in its project: no lazy look-ups later.
            found.agent = agent
            found.project = project
        at += len(_SESSION_FIELDS)
    ended = None
    if ended_sessions:
        ended = tuple(EndedSession(*row[at : at + len(_ENDED_FIELDS)]) for row in rows if row[at] is not None)
        at += len(_ENDED_FIELDS)
    block = None
    if with_block:
        assert block_key is not None
        block = (
            _block_from_row(found, principal, block_key[0], block_key[1], rows[0][at : at + _BLOCK_WIDTH])
            if found is not None and rows[0][at] is not None
            else (None, [])
        )
        at += _BLOCK_WIDTH
    later_rows = None
    if later and principal is not None and found is not None and rows[0][at] is not None:
        later_rows = []
        for part in rows[0][at : at + len(later)]:
            for row in json.loads(part) if isinstance(part, str) else part:
                # JSON has no NaN: a distance pgvector gives as NaN comes as the string.
                if row[_DISTANCE].__class__ is str:
                    row[_DISTANCE] = float(row[_DISTANCE])
                later_rows.append(tuple(row))
    return RetrievalHeader(
        principal=principal,
        newest_verified=newest,
        facts_generation=int(generation),
        rulings=rulings_from((a, b, bool(pending)) for a, b, pending in rulings or ()),
        session_read=with_session,
        session=found,
        ended_sessions=ended,
        block=block,
        newest_read=not with_block,
        few_facts=bool(few_facts),
        later_rows=later_rows,
    )


def cached_block(
    session: Session, principal: Principal | None, *, identity_verified: bool, version: PolicyVersion
) -> tuple[SessionBlock | None, list[Candidate]]:
    """The session's cached start block under this key, and its facts within this retrieval's scope (R1, R12).

    One statement (the block by its unique key, its facts by primary key)
    where two were sent. A fact outside the scope is not returned, so the
    caller treats it as no longer eligible.
    """
    principal_id = principal.pk if principal is not None else None
    with connection.cursor() as cursor:
        cursor.execute(
            _BLOCK,
            [session.project_id, principal_id, session.pk, principal_id, identity_verified, version.pk],
        )
        row = cursor.fetchone()
    if row is None:
        return None, []
    return _block_from_row(session, principal, identity_verified, version, row)


def _block_from_row(
    session: Session,
    principal: Principal | None,
    identity_verified: bool,
    version: PolicyVersion,
    row: Row,
) -> tuple[SessionBlock, list[Candidate]]:
    """The block and its facts from ``_BLOCK_SELECT``'s row."""
    block_id, mode, text, tokens, fact_ids, items, hint_session_id, created_at, facts = row
    block = SessionBlock(
        id=block_id,
        session=session,
        principal=principal,
        identity_verified=identity_verified,
        policy_version=version,
        mode=mode,
        text=text,
        tokens=tokens,
        fact_ids=list(fact_ids or []),
        items=json.loads(items) if isinstance(items, str) else items,
        hint_session_id=hint_session_id,
        created_at=created_at,
    )
    block._state.adding = False
    block._state.db = connection.alias
    if isinstance(facts, str):
        facts = json.loads(facts)
    candidates = _to_candidates(facts or ())
    return block, sorted(candidates, key=lambda c: c.fact_id)


# --- The retrieval log for people (console and governance API) -------------

LOG_ORDER = ("-created_at", "-id")

Cursor = tuple[datetime, int]


@dataclass(frozen=True)
class LogFilters:
    agent: str | None = None  # agent slug
    principal: str | None = None  # principal external id
    session: str | None = None  # session external id
    mode: str | None = None
    reason: str | None = None  # one of REASONS
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive
    over_budget: bool = False


@dataclass(frozen=True)
class LogPage:
    events: list[RetrievalEvent]
    next_cursor: str | None  # None on the last page


def decode_cursor(value: str) -> Cursor:
    """A retrieval log cursor; InvalidCursor for anything else."""
    moment, (event_id,) = cursors.decode_cursor(value, 1)
    return moment, event_id


def _partitions(project_ids: list[int], filters: LogFilters) -> tuple[str, list[int]]:
    """The narrowest indexed column to walk newest-first, and its values.

    Each (column, -created_at, -id) index yields one value's events already in
    log order, so a page is the first rows of each walk merged: no sort over
    the table and no OFFSET. A session has so few events that its plain FK
    index plus a small sort is as good.
    """
    if filters.session:
        sessions = Session.objects.filter(project_id__in=project_ids, external_id=filters.session)
        return "session_id", list(sessions.values_list("pk", flat=True))
    if filters.principal:
        principals = Principal.objects.filter(project_id__in=project_ids, external_id=filters.principal)
        return "principal_id", list(principals.values_list("pk", flat=True))
    if filters.agent:
        agents = Agent.objects.filter(project_id__in=project_ids, slug=filters.agent)
        return "agent_id", list(agents.values_list("pk", flat=True))
    return "project_id", project_ids


def _filtered(project_ids: list[int], filters: LogFilters, after: Cursor | None) -> QuerySet[RetrievalEvent]:
    qs = RetrievalEvent.objects.filter(project_id__in=project_ids)
    # Filters that are not the walked column become subqueries: no extra round trip.
    if filters.agent:
        qs = qs.filter(
            agent_id__in=Agent.objects.filter(project_id__in=project_ids, slug=filters.agent).values("pk")
        )
    if filters.principal:
        qs = qs.filter(
            principal_id__in=Principal.objects.filter(
                project_id__in=project_ids, external_id=filters.principal
            ).values("pk")
        )
    qs = narrowed(qs, mode=filters.mode, created_at__gte=filters.since, created_at__lt=filters.until)
    if filters.reason:
        qs = qs.filter(reasons__contains=[filters.reason])
    if filters.over_budget:
        qs = qs.filter(reasons__contains=["over_budget"])
    if after is not None:
        created_at, event_id = after
        # Row-wise (created_at, id) < cursor, spelled so the index's leading
        # column bounds the scan; equal timestamps are split by id.
        qs = qs.filter(created_at__lte=created_at).filter(
            Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=event_id)
        )
    return qs


def retrieval_log_keys(
    project_ids: list[int], filters: LogFilters, *, after: Cursor | None, limit: int
) -> QuerySet[RetrievalEvent, tuple[datetime, int]] | None:
    """The (created_at, id) of one page, newest first; None when nothing can match.

    One index walk per partition value, each stopped after ``limit`` rows,
    merged by a UNION ALL with the same ordering and limit.
    """
    field, values = _partitions(project_ids, filters)
    if not values:
        return None
    base = _filtered(project_ids, filters, after)
    walks = [
        base.filter(**{field: value}).order_by(*LOG_ORDER).values_list("created_at", "id")[:limit]
        for value in values
    ]
    if len(walks) == 1:
        return walks[0]
    return walks[0].union(*walks[1:], all=True).order_by(*LOG_ORDER)[:limit]


def retrieval_log(
    projects: QuerySet[Project], filters: LogFilters, *, after: Cursor | None, limit: int
) -> LogPage:
    """Newest first, keyset-paginated on (created_at, id): stays fast at millions of events."""
    project_ids = list(projects.values_list("pk", flat=True))
    keys_qs = retrieval_log_keys(project_ids, filters, after=after, limit=limit + 1)
    keys = list(keys_qs) if keys_qs is not None else []
    page, more = keys[:limit], len(keys) > limit
    if not page:
        return LogPage(events=[], next_cursor=None)
    rows = (
        RetrievalEvent.objects.filter(pk__in=[event_id for _, event_id in page])
        .select_related("project", "agent", "principal", "session", "policy_version")
        # The listing names the version; its settings are read on the policy pages.
        .defer("policy_version__settings")
    )
    events = sorted(rows, key=lambda e: (e.created_at, e.pk), reverse=True)
    last = page[-1]
    return LogPage(events=events, next_cursor=cursors.encode_cursor(*last) if more else None)


def event_candidates(event: RetrievalEvent) -> list[CandidateRecord]:
    """The event's candidates, selected ones in rank order first, with their facts' display fields."""
    candidates = event.ranked_candidates()
    facts = Fact.objects.only(
        "id",
        "kind",
        "key",
        "statement",
        "status",
        "source_type",
        "source_ref",
        "authority",
        "principal_id",
    ).in_bulk([c.fact_id for c in candidates])
    for candidate in candidates:
        candidate.fact = facts.get(candidate.fact_id)
    return candidates


@dataclass(frozen=True)
class Belief:
    """One active fact as a given agent's policy would see it (the principal page)."""

    fact: Fact
    age_days: int
    tier: str | None  # recent | confirm | stale; None when no policy was chosen
    below_authority: bool
    kind_allowed: bool

    @property
    def disputed(self) -> bool:
        return self.fact.confidence == "disputed"


def principal_beliefs(
    principal: Principal, policy: PolicySettings | None, *, now: datetime
) -> list[tuple[str, list[Belief]]]:
    """What an agent believes about this person: their active facts by kind, with R9 tiers."""
    groups: dict[str, list[Belief]] = {}
    for fact in active_memories(principal).defer("embedding"):
        age = age_in_days(fact.last_verified_at, now)
        groups.setdefault(fact.kind, []).append(
            Belief(
                fact=fact,
                age_days=age,
                tier=freshness_tier(age, policy) if policy else None,
                below_authority=policy is not None and fact.authority < policy.min_authority,
                kind_allowed=policy is None or fact.kind in policy.allowed_kinds,
            )
        )
    return list(groups.items())


def tokens_fraction(event: RetrievalEvent) -> float:
    return 0.0 if not event.token_budget else min(1.0, event.tokens_used / event.token_budget)


@dataclass(frozen=True)
class CandidateFact:
    """One candidate of an event with the fact's scope and state as they are now (quality checks)."""

    fact_id: int
    decision: str
    reason: str | None
    project_id: int
    principal_id: int | None
    status: str
    statement: str


def candidate_facts(event: RetrievalEvent) -> list[CandidateFact]:
    """Every candidate of ``event`` with its fact's project, person and status, in one query.

    The memory-quality harness reads these right after a retrieval to see
    whether another project's or another person's memory was among them.
    """
    candidates = event.ranked_candidates()
    facts = {
        row[0]: row[1:]
        for row in Fact.objects.filter(pk__in=[c.fact_id for c in candidates]).values_list(
            "id", "project_id", "principal_id", "status", "statement"
        )
    }
    return [CandidateFact(c.fact_id, c.decision, c.reason, *facts[c.fact_id]) for c in candidates]


def selected_fact_ids(event_id: int) -> list[int]:
    """The facts an event injected, in rank order (feedback may name only these)."""
    ids = RetrievalEvent.objects.filter(pk=event_id).values_list("selected_fact_ids", flat=True).first()
    return list(ids or [])


def events_with_candidate(fact_id: int) -> QuerySet[RetrievalEvent]:
    """The retrieval events that had this fact among their candidates (through its GIN index)."""
    return RetrievalEvent.objects.filter(pk__in=events_naming(fact_id))


def fact_candidate_history(
    fact_ids: Sequence[int], *, limit: int = 20
) -> dict[int, list[tuple[int, datetime, str, str | None]]]:
    """Per fact, its latest appearances as a candidate: (event id, time, decision, reason), newest first."""
    history: dict[int, list[tuple[int, datetime, str, str | None]]] = {fact_id: [] for fact_id in fact_ids}
    for fact_id in fact_ids:
        events = (
            events_with_candidate(fact_id)
            .order_by("-created_at", "-id")
            .values_list("id", "created_at", "candidate_data")[:limit]
        )
        for event_id, created_at, data in events:
            for candidate in decode_candidates(event_id, data):
                if candidate.fact_id == fact_id:
                    history[fact_id].append((event_id, created_at, candidate.decision, candidate.reason))
                    break
    return history


# The retrieval log's monthly partitions (migration 0034): governance_retrievalevent_pYYYYMM.
PARTITION_PREFIX = "governance_retrievalevent_p"
DEFAULT_PARTITION = "governance_retrievalevent_default"


def stored_months() -> list[date]:
    """The months that have a partition of the retrieval log, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'governance_retrievalevent'::regclass AND c.relname LIKE %s ORDER BY 1",
            [PARTITION_PREFIX.replace("_", r"\_") + "%"],
        )
        names = [row[0] for row in cursor.fetchall()]
    return [date(int(name[-6:-2]), int(name[-2:]), 1) for name in names]


def default_partition_months(before: datetime) -> list[date]:
    """Months before ``before`` with events in the default partition, oldest first.

    ``created_at < before`` limits the scan to the default partition and any
    month partitions past retention, which the upkeep drops first.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT date_trunc('month', created_at AT TIME ZONE 'UTC')::date "
            "FROM governance_retrievalevent WHERE created_at < %s AND tableoid = %s::regclass ORDER BY 1",
            [before, DEFAULT_PARTITION],
        )
        return [row[0] for row in cursor.fetchall()]
