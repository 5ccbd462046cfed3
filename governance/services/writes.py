"""Submitting a memory write: the guard, conflicts, supersession, corroboration.

``submit_write`` is the only door through which agent memory enters the
store (R3-R7, R16). Everything it decides is recorded on the Write row and in
the audit trail in the same transaction.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from types import EllipsisType
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Max
from django.utils import timezone

from governance import prepared
from governance.models import Agent, Fact, Principal, RetrievalEvent, Session, Write
from governance.rules import contradictions, guard, guard_plain, identifiers
from governance.rules import supersession as supersession_rules
from governance.rules import text as text_rules
from governance.rules.provenance import ref_problem
from governance.rules.text import (
    Lexical,
    lexical_signature,
    near_duplicate,
    normalise_statement,
    statement_fingerprint,
)
from governance.rules.tokens import count_tokens
from governance.services import audit, conflicts, session_blocks, statements
from governance.services.embeddings import (
    fact_vector_from_guard,
    guard_embedding,
    guard_embeddings,
    guard_vectors_of,
)
from governance.services.facts import (
    corroborate_fact,
    enqueue_embedding,
    enqueue_embeddings,
    record_late_observation,
    statement_digest,
    supersede_fact,
)
from governance.services.sessions import SessionError, open_session

BURST_WINDOW = timedelta(minutes=10)
# The agent's newest writes in the window that the burst check compares a write with.
BURST_RECENT_STATEMENTS = 50
AMPLIFICATION_WINDOW = timedelta(hours=1)
CONFLICT_CHECK = "conflict"
POSSIBLE_CONFLICT_CHECK = "possible_conflict"
# Active facts of one principal (or the project) compared for an unkeyed
# contradiction: the newest ones, which a new statement is most likely to update.
CONTRADICTION_POOL = 200
# Tombstones compared for a reworded withdrawn statement; those sharing a value.
TOMBSTONE_VALUE_MATCHES = 50
RISK_BY_SEVERITY = {"high": 3, "medium": 2, "low": 1}
# The agent's writes waiting for a reviewer, counted up to the limit (the one
# parameter): only whether the limit is reached matters, and the count then
# costs at most the limit's worth of index entries (write_agent_waiting_proj_idx,
# which carries the project row-level security filters on), however long the
# agent's backlog has grown.
WAITING_SQL = (
    "(SELECT count(*) FROM (SELECT 1 FROM governance_write w WHERE w.agent_id = %s"
    " AND w.status IN ('pending_review', 'quarantined') LIMIT %s) waiting)"
)


def _waiting_cap() -> int:
    """WAITING_SQL's LIMIT. PostgreSQL refuses a negative one; a limit set below
    zero then counts nothing and refuses every write that would wait, as it did."""
    return max(settings.MAX_PENDING_WRITES_PER_AGENT, 0)


class IdempotencyConflict(Exception):
    """The Idempotency-Key was used before with another body."""


class SourceNotAllowed(Exception):
    """The agent may not claim this source type (answered as 403, naming the allowed ones)."""

    def __init__(self, source_type: str, allowed: tuple[str, ...]) -> None:
        if source_type in supersession_rules.PERSON_ONLY_SOURCES:
            why = "reviewer provenance comes only from a person in the console or governance API"
        elif source_type == supersession_rules.CONFIG_SOURCE:
            why = "only agents an administrator marks as configuration sources may write configuration"
        else:
            why = "this agent is not configured to claim it"
        super().__init__(
            f"This agent may not write memory with source type '{source_type}': {why}. "
            f"Allowed: {', '.join(allowed) or 'none'}."
        )
        self.source_type = source_type
        self.allowed = allowed


def claimable_sources(agent: Agent) -> tuple[str, ...]:
    return supersession_rules.claimable_sources(
        agent.allowed_source_types, is_config_source=agent.is_config_source
    )


class ReviewQueueFull(Exception):
    """The agent already has as many writes waiting for a reviewer as it may (answered as 429)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"This agent already has {limit} memory writes waiting for a reviewer, the most it may have. "
            "Nothing was stored: send this write again once reviewers have worked through the queue."
        )
        self.limit = limit


class UnknownReference(Exception):
    """A field this write cannot use: an unknown object, a session bound to someone else, or a
    source reference that is not an identifier (answered as 400, naming the field)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class WriteRequest:
    """A validated write as the agent sent it (the API serializer builds this)."""

    principal: str | None
    kind: str
    key: str | None
    statement: str
    source_type: str
    source_ref: str
    source_observed_at: datetime
    authority: int | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    session: str | None = None
    derived_from_retrieval: int | None = None

    def digest(self) -> str:
        """Canonical hash of the body, for Idempotency-Key comparison.

        The body holds the statement, so this is a digest of erasable text and
        is keyed like every other (R8).
        """
        body = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.__dict__.items()}
        return statement_digest(json.dumps(body, sort_keys=True))


def fingerprint_key() -> bytes:
    return settings.TOMBSTONE_KEY.encode()


def submit_write(
    agent: Agent,
    request: WriteRequest,
    *,
    idempotency_key: str | None = None,
    extra_findings: tuple[guard.Finding, ...] = (),
    auto_approve_min_authority: int | None = None,
    after_create: Callable[[Write], None] | None = None,
    corroborate: bool = True,
    guard_vector: tuple[float, ...] | EllipsisType | None = ...,
    now: datetime | None = None,
    embed_later: list[int] | None = None,
    principals: Mapping[str, Principal] | None = None,
    read_ahead: tuple[float, ...] | None = None,
) -> Write:
    """Record the write and everything that follows from it; replay for a repeated key.

    ``extra_findings`` come from checks outside the guard (R17's summary check)
    and weigh on the outcome like the guard's own; ``auto_approve_min_authority``
    overrides the agent policy's floor for writes that another check vouches
    for; ``after_create`` runs in the same transaction once the write exists.
    ``corroborate=False`` always makes a fact of its own: a session summary
    must keep its own event range and check, and a repeat of an earlier
    summary must not skip the review its own check asked for.
    ``guard_vector`` is the statement's guard embedding when the caller
    computed it already (``submit_batch`` embeds a whole batch in one call).
    ``embed_later`` collects the id of a new fact instead of queueing its
    embedding, for a caller that queues one task for many (``submit_batch``).
    ``read_ahead`` is the guard's embedding of a plain statement made ahead of
    time (``_Batch.read_first``), used only where the write's meaning must be
    read before it is answered after all: the write is judged as if it came
    alone, with one model call fewer.
    """
    _refuse_unclaimable(agent, request)
    digest = request.digest()
    if idempotency_key:
        existing = _replay(agent, idempotency_key, digest)
        if existing is not None:
            return existing
    # R5: the meaning model reads every statement before its write is answered,
    # but a plain one (rules/guard_plain.py), which it reads after: the patterns
    # alone decide such a write, and complete_meaning_checks takes a second look
    # once the embedding task has the vector. The model runs here, outside the
    # transaction, so no row lock waits on it; None (the model failed) makes the
    # guard hold the write for a person.
    meaning_later = (
        guard_vector is ...
        and not extra_findings
        and after_create is None
        and meaning_can_wait(agent, request)
    )
    embedding: tuple[float, ...] | None = None
    if not meaning_later:
        embedding = guard_embedding(request.statement) if guard_vector is ... else guard_vector
    raced = False
    while True:
        try:
            return _submit(
                agent,
                request,
                idempotency_key=idempotency_key,
                digest=digest,
                extra_findings=extra_findings,
                auto_approve_min_authority=auto_approve_min_authority,
                after_create=after_create,
                corroborate=corroborate,
                embedding=embedding,
                meaning_later=meaning_later,
                now=now,
                embed_later=embed_later,
                principals=principals,
            )
        except _ReadMeaningFirst:
            # The write would do more than add an active fact: judged again from
            # the start, with the model's reading (its transaction rolled back).
            meaning_later = False
            embedding = read_ahead if read_ahead is not None else guard_embedding(request.statement)
        except IntegrityError as exc:
            # A concurrent request with the same key committed first (the unique
            # index made us wait for it): answer with its write.
            if idempotency_key and "write_idempotency_key_unique" in str(exc):
                existing = _replay(agent, idempotency_key, digest)
                if existing is not None:
                    return existing
            # Two first writes for one key raced and the other became active:
            # once more, now seeing it as the fact to supersede or corroborate.
            if not raced and "fact_one_active_per_key" in str(exc):
                raced = True
                continue
            raise


class _ReadMeaningFirst(Exception):
    """A write whose meaning was to be read later would supersede, wait for review or be held:
    the meaning model reads it first, so those decisions never rest on the patterns alone."""


def meaning_can_wait(agent: Agent, request: WriteRequest) -> bool:
    """Whether the guard's meaning model may read this write's statement after it is answered (R5).

    Only a plain statement (rules/guard_plain.py) that can do no more than add
    an active fact (``_adds_a_fact_only``), as far as the request tells:

    - not of a kind retrieval finds by its vector each round (the write stores
      the vector with the row, so the fact can be retrieved in the same turn);
    - no key: a keyed write replaces whatever fact holds its key, which only a
      write read in full may do;
    - authority at the agent's auto-approve floor, and not derived from a
      retrieval (R16): anything else waits for a reviewer, who should see the
      model's reading with it.

    A claim of a value (``_claims``: "I live in Leeds", "email me") may wait
    too: it changes other facts only if an active fact gives another value, and
    the look-ups find that. Whatever they find (a tombstone, a burst, a fact to
    supersede, a conflict or a possible one) sends the write back to be read
    first (``_ReadMeaningFirst``).
    """
    assert agent.active_policy is not None, "every agent has an active policy version"
    policy = agent.active_policy.policy
    if request.key or request.kind == "slot" or policy.is_per_round(request.kind):
        return False
    if request.derived_from_retrieval is not None:
        return False
    cap = guard.source_cap(request.source_type, supersession_rules.effective_caps(agent.project.source_caps))
    if min(request.authority or cap, cap) < policy.auto_approve_min_authority:
        return False
    return guard_plain.reads_plainly(request.statement)


MAX_BATCH = 500
# What submit_write refuses a single write for; in a batch they refuse only that write.
REFUSALS = (SourceNotAllowed, UnknownReference, ReviewQueueFull)


@dataclass(frozen=True)
class BatchOutcome:
    """One write of a batch: the write as submitted, or why it was refused (nothing stored)."""

    write: Write | None
    refusal: Exception | None


def submit_batch(agent: Agent, requests: Sequence[WriteRequest]) -> list[BatchOutcome]:
    """Up to MAX_BATCH writes in one transaction, each judged as ``submit_write`` judges it (imports).

    Every write passes the same guard, conflict and supersession checks as a
    single write, in the order given, so a later write sees the earlier ones,
    and a refused write leaves nothing behind and does not stop the others.
    The guard's embeddings of the statements whose meaning cannot wait
    (``meaning_can_wait``) are computed in one model call before the
    transaction, and those of the plain ones the batch can tell are likely to
    need the model's reading first (``_Batch.read_first``) in a second call
    once it has read the store, to be used where they do; the other plain
    ones are read by the embedding task. What the writes
    meet in the store is read for all of them in a few statements up front
    (``_Batch``); a write that meets nothing but
    the guard (a new fact, a review, a refusal: the common import) is judged
    against that reading and what the batch added, and its fact, write and
    audit entry join one multi-row INSERT. A write that meets more (a fact
    to supersede or corroborate, a conflict, a session, a retrieval) goes
    through ``submit_write`` in its own savepoint, once the rows before it are
    inserted, and the batch then reads that person's facts afresh that way too.
    """
    if len(requests) > MAX_BATCH:
        raise ValueError(f"At most {MAX_BATCH} writes per batch.")
    # The model reads at once only the statements whose meaning cannot wait (as in submit_write).
    later = [meaning_can_wait(agent, r) for r in requests]
    read_now = iter(
        guard_embeddings([r.statement for r, wait in zip(requests, later, strict=True) if not wait])
    )
    vectors: list[tuple[float, ...] | EllipsisType | None] = [
        ... if wait else next(read_now) for wait in later
    ]
    outcomes: list[BatchOutcome] = []
    with transaction.atomic(), audit.one_seal_per_chain():
        batch = _Batch(agent, requests)
        batch.read_first(requests, vectors)
        for index, (request, vector) in enumerate(zip(requests, vectors, strict=True)):
            try:
                write = batch.take(index, request, vector)
                if write is None:
                    batch.flush(outcomes)
                    write = batch.one_by_one(index, request, vector)
            except REFUSALS as exc:
                outcomes.append(BatchOutcome(write=None, refusal=exc))
            else:
                outcomes.append(BatchOutcome(write=write, refusal=None))
        batch.flush(outcomes)
        # One task for the batch's new facts, queued when the batch commits.
        enqueue_embeddings(
            [
                o.write.fact_id
                for o in outcomes
                if o.write is not None and o.write.fact_id is not None and o.write.corroborated_id is None
            ]
        )
    return outcomes


@dataclass
class _Taken:
    """A write of the batch judged against the batch's reading, its rows not inserted yet."""

    index: int
    request: WriteRequest
    vector: tuple[float, ...] | EllipsisType | None  # ...: its meaning is read after
    write: Write
    entry: models.Model
    principal: Principal | None  # new with this write, inserted with it


class _Batch:
    """What a batch's writes meet in the store, read for all of them at once (the per-write
    ``_what_the_write_meets`` and ``lock_active_fact``, set-based), and kept up to date with
    what the batch adds, so each write is judged as if the ones before it were stored.

    Only facts of people (a principal, no session) are followed this way. Once a write of a
    person went through ``submit_write``, which may have superseded, corroborated or flagged
    that person's facts, the reading no longer describes them: that person's later writes go
    the same way. What is the agent's (its recent statements, writes waiting for review) and
    the project's (rejected assertions) is followed for every write.
    """

    def __init__(self, agent: Agent, requests: Sequence[WriteRequest]) -> None:
        assert agent.active_policy is not None, "every agent has an active policy version"
        self.agent = agent
        self.encoding = agent.active_policy.policy.encoding
        self.key = fingerprint_key()
        self.taken: list[_Taken] = []
        # People whose facts the batch no longer follows (see above).
        self.one_by_one_for: set[str | None] = set()
        # After a race with another transaction, every write goes one by one.
        self.gave_up = False
        self.principals: dict[str, Principal] = {}
        named = {r.principal for r in requests if r.principal is not None}
        if named:
            self.principals.update(
                (p.external_id, p)
                for p in Principal.objects.filter(project=agent.project, external_id__in=named)
            )
        self.fingerprints = [statement_fingerprint(r.statement, self.key) for r in requests]
        self._read_the_agent(requests, new_people=len(named - self.principals.keys()))
        self._read_the_facts(requests)
        # Facts the batch made active, per person, oldest first.
        self.made: dict[str, list[Fact]] = {}
        # The guard's embeddings read ahead, by the write's index (``read_first``), and the writes
        # ``take`` found to need theirs before they are answered (go one by one with it).
        self.read_ahead: dict[int, tuple[float, ...] | None] = {}
        self.read_now: set[int] = set()

    def _read_the_agent(self, requests: Sequence[WriteRequest], *, new_people: int) -> None:
        """Ids for every write, fact and new person, and what the guard reads beyond the facts,
        in one statement."""
        project_id, now = self.agent.project_id, timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT"
                " ARRAY(SELECT nextval(pg_get_serial_sequence('governance_write', 'id'))"
                " FROM generate_series(1, %s)),"
                " ARRAY(SELECT nextval(pg_get_serial_sequence('governance_fact', 'id'))"
                " FROM generate_series(1, %s)),"
                " ARRAY(SELECT nextval(pg_get_serial_sequence('governance_principal', 'id'))"
                " FROM generate_series(1, %s)),"
                " ARRAY(SELECT DISTINCT w.fingerprint FROM governance_write w WHERE w.project_id = %s"
                " AND w.status = 'rejected' AND w.fingerprint = ANY(%s::text[])),"
                " (SELECT json_agg(json_build_array(t.fingerprint, t.id) ORDER BY t.id)"
                " FROM governance_tombstone t WHERE t.project_id = %s AND t.fingerprint = ANY(%s::text[])),"
                " (SELECT json_agg(json_build_array(r.created_at, r.statement) ORDER BY r.created_at DESC)"
                " FROM (SELECT w.created_at, w.statement FROM governance_write w WHERE w.agent_id = %s"
                f" AND w.created_at >= %s AND w.statement <> '' ORDER BY w.created_at DESC"
                f" LIMIT {BURST_RECENT_STATEMENTS}) r),"
                f" {WAITING_SQL}",
                [
                    len(requests),
                    len(requests),
                    new_people,
                    project_id,
                    self.fingerprints,
                    project_id,
                    self.fingerprints,
                    self.agent.pk,
                    now - BURST_WINDOW,
                    self.agent.pk,
                    _waiting_cap(),
                ],
            )
            write_ids, fact_ids, principal_ids, rejected, tombstones, recent, waiting = cursor.fetchone()
        # Ids for write i and its fact, allocated before they are needed so that the write, its
        # 201 body and its audit entry are complete before the INSERT (as in submit_write).
        self.ids = {i: (w, f) for i, (w, f) in enumerate(zip(write_ids, fact_ids, strict=True))}
        # How many writes the next ``_allocate`` gives ids to (doubling from 1 after each write
        # that went one by one).
        self.ahead = 1
        self.principal_ids = list(principal_ids)
        self.rejected: set[str] = set(rejected)
        self.tombstones: dict[str, int] = {}
        for fingerprint, pk in _json(tombstones):
            self.tombstones.setdefault(fingerprint, pk)
        # Newest first, as the guard reads them.
        self.recent = [(datetime.fromisoformat(at), statement) for at, statement in _json(recent)]
        self.waiting: int = waiting

    def _read_the_facts(self, requests: Sequence[WriteRequest]) -> None:
        """The facts and tombstones of the batch's people that the writes may meet, in one
        statement: active facts holding a key a write names, active facts a write repeats
        word for word, the newest facts of each (person, kind) for a near-duplicate, the
        newest of each person for a contradiction, and tombstones sharing a value with a write."""
        people = sorted({self.principals[r.principal].pk for r in requests if r.principal in self.principals})
        self.active_keys: set[tuple[str, str]] = set()
        self.exact: dict[tuple[str, str, str], int] = {}
        # (fact id, statement, lexical signature), newest first.
        self.pools: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
        # (observed at, fact id, statement, key, stored claims), newest observation first.
        self.contradiction_pools: dict[str, list[tuple[datetime, int, str, str | None, str | None]]] = {}
        self.tombstone_values: dict[str, list[tuple[int, frozenset[str]]]] = {}
        self.digests = [sorted(identifiers.value_digests(r.statement, self.key)) for r in requests]
        if not people:
            return
        names = {p.pk: p.external_id for p in self.principals.values()}
        project_id = self.agent.project_id
        keys = sorted({r.key for r in requests if r.key})
        slots = sorted(
            {
                (self.principals[r.principal].pk, r.kind)
                for r in requests
                if r.principal in self.principals and not r.key
            }
        )
        claimants = sorted(
            {
                self.principals[r.principal].pk
                for r in requests
                if r.principal in self.principals and _claims(r)
            }
        )
        digests = sorted({d for ds in self.digests for d in ds})
        active = "f.project_id = %s AND f.session_id IS NULL AND f.status = 'active'"
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT"
                " (SELECT json_agg(json_build_array(f.principal_id, f.key)) FROM governance_fact f"
                f" WHERE {active} AND f.principal_id = ANY(%s::bigint[]) AND f.key = ANY(%s::text[])),"
                " (SELECT json_agg(json_build_array(f.principal_id, f.kind, f.fingerprint, f.id)"
                f" ORDER BY f.id) FROM governance_fact f WHERE {active}"
                " AND f.principal_id = ANY(%s::bigint[]) AND f.fingerprint = ANY(%s::text[])),"
                " (SELECT json_agg(json_build_array(s.principal_id, s.kind, c.id, c.statement,"
                " c.lexical_signature))"
                " FROM unnest(%s::bigint[], %s::varchar[]) s(principal_id, kind) CROSS JOIN LATERAL"
                f" (SELECT f.id, f.statement, f.lexical_signature FROM governance_fact f WHERE {active}"
                " AND f.principal_id = s.principal_id AND f.kind = s.kind"
                f" ORDER BY f.id DESC LIMIT {NEAR_DUPLICATE_POOL}) c),"
                " (SELECT json_agg(json_build_array(s.principal_id, c.source_observed_at, c.id, c.statement,"
                " c.key, c.claims)) FROM unnest(%s::bigint[]) s(principal_id) CROSS JOIN LATERAL"
                " (SELECT f.id, f.statement, f.key, f.source_observed_at, f.claims FROM governance_fact f"
                f" WHERE {active}"
                " AND f.principal_id = s.principal_id AND f.kind NOT IN ('slot', 'summary')"
                f" ORDER BY f.source_observed_at DESC, f.id DESC LIMIT {CONTRADICTION_POOL}) c),"
                " (SELECT json_agg(json_build_array(f.principal_id, t.id, t.value_digests) ORDER BY t.id)"
                " FROM governance_tombstone t JOIN governance_fact f ON f.id = t.fact_id"
                " WHERE t.project_id = %s AND f.principal_id = ANY(%s::bigint[])"
                " AND t.value_digests && %s::varchar(64)[])",
                [
                    project_id,
                    people,
                    keys,
                    project_id,
                    people,
                    self.fingerprints,
                    [pk for pk, _ in slots],
                    [kind for _, kind in slots],
                    project_id,
                    claimants,
                    project_id,
                    project_id,
                    people,
                    digests,
                ],
            )
            held, exact, pools, contradiction_pools, tombstones = cursor.fetchone()
        self.active_keys = {(names[pk], key) for pk, key in _json(held)}
        for pk, kind, fingerprint, fact_id in _json(exact):
            self.exact.setdefault((names[pk], kind, fingerprint), fact_id)
        for pk, kind, fact_id, statement, signature in _json(pools):
            self.pools.setdefault((names[pk], kind), []).append((fact_id, statement, signature))
        for pool in self.pools.values():
            pool.sort(reverse=True)
        for pk, observed_at, fact_id, statement, key, claims in _json(contradiction_pools):
            self.contradiction_pools.setdefault(names[pk], []).append(
                (datetime.fromisoformat(observed_at), fact_id, statement, key, claims)
            )
        for pk, tombstone_id, values in _json(tombstones):
            self.tombstone_values.setdefault(names[pk], []).append((tombstone_id, frozenset(values)))

    def read_first(
        self, requests: Sequence[WriteRequest], vectors: Sequence[tuple[float, ...] | EllipsisType | None]
    ) -> None:
        """The model's reading, in one call, of the plain writes (their ``vectors`` entry is
        ``...``) the batch can tell are likely to need it before they are answered, kept in
        ``self.read_ahead`` by the write's index: a near-repeat of enough of the agent's recent
        statements to be a burst (R5), and a claimed value that another fact of the person gives
        differently (R6: a fact the batch read, or an earlier write's).

        A single plain write that meets either is judged on the patterns, rolled back and judged
        again with the model's reading (``_ReadMeaningFirst``). In a batch that is a savepoint, a
        second pass and a model call of its own per write, inside the transaction: an import of
        one statement for many people (a burst from its fourth write on), or of many people's
        new values, ran at a tenth of the speed of the same import read first.

        The reading is used only where the write, judged on the patterns as a single write
        would be, turns out to need it (``take``, and ``submit_write``'s ``read_ahead``). The
        guess counts statements of writes that will be refused and claims of writes that will
        not stand, so it reads some writes that need no reading; had those been judged with it,
        a batch would store what the same writes one by one do not (their meaning read at once,
        where alone it is read after). What the guess misses (a tombstone, a rejected repeat)
        is read by a model call of its own, as before. Nothing in the store is locked yet: the
        batch has only read.
        """
        since = timezone.now() - BURST_WINDOW
        # Newest first, as the guard reads them: the batch's statements before the write's own.
        recent = [statement for at, statement in self.recent if at >= since][:BURST_RECENT_STATEMENTS]
        # Per person: the batch's claims so far (newest first, no id yet), then the active facts
        # read; at most the pool a write is compared with (CONTRADICTION_POOL).
        pools: dict[str | None, list[tuple[int, str, str | None, str | None]]] = {}
        wanted: list[int] = []
        for index, (request, vector) in enumerate(zip(requests, vectors, strict=True)):
            claims = _claims(request)
            name = request.principal
            if claims and name not in pools:
                pools[name] = [row[1:] for row in self.contradiction_pools.get(name or "", [])]
            if vector is ... and (
                guard.burst_duplicates(request.statement, recent) >= guard.BURST_MIN_DUPLICATES
                or (claims and _contradictions(request, claims, pools[name]))
            ):
                wanted.append(index)
            if request.statement:
                recent.insert(0, request.statement)
                del recent[BURST_RECENT_STATEMENTS:]
            if claims:
                pools[name].insert(0, (0, request.statement, request.key, None))
                del pools[name][CONTRADICTION_POOL:]
        if wanted:
            read = guard_embeddings([requests[index].statement for index in wanted])
            self.read_ahead.update(zip(wanted, read, strict=True))

    def take(
        self, index: int, request: WriteRequest, vector: tuple[float, ...] | EllipsisType | None
    ) -> Write | None:
        """The write, judged against the batch's reading and its rows queued for ``flush``; or None
        when it meets more than the guard and goes through ``submit_write`` instead (as does a
        plain statement, ``vector`` ..., that the patterns would not simply let in or refuse)."""
        _refuse_unclaimable(self.agent, request)
        name = request.principal
        if (
            self.gave_up
            or name is None
            or name in self.one_by_one_for
            or request.session
            or request.kind == "slot"
            or request.derived_from_retrieval is not None
            or (request.key and (name, request.key) in self.active_keys)
        ):
            return None
        if index not in self.ids:
            self._allocate(index)
        write_id, fact_id = self.ids[index]
        now = timezone.now()
        since = now - BURST_WINDOW
        fingerprint = self.fingerprints[index]
        made = self.made.get(name, [])
        same_slot = [f for f in made if f.kind == request.kind]
        exact = next((f.pk for f in same_slot if f.fingerprint == fingerprint), None)
        digests = set(self.digests[index])
        wanted = text_rules.near_duplicates_of(request.statement, self.key)
        seen = Seen(
            write_id=write_id,
            fact_id=fact_id,
            rejected=fingerprint in self.rejected,
            tombstone_id=self.tombstones.get(fingerprint),
            tombstone_values={
                str(pk): values
                for pk, values in [t for t in self.tombstone_values.get(name, []) if t[1] & digests][
                    :TOMBSTONE_VALUE_MATCHES
                ]
            },
            recent_statements=tuple(
                islice((s for at, s in self.recent if at >= since), BURST_RECENT_STATEMENTS)
            ),
            # Only a derived write is judged by it, and those go one by one.
            recent_derived=0,
            waiting=self.waiting,
            exact_duplicate_id=self.exact.get((name, request.kind, fingerprint), exact),
            # The pool as a single write reads it, less what cannot be a near-duplicate.
            candidates=tuple(
                (pk, statement)
                for pk, statement, signature in (
                    *((f.pk, f.statement, f.lexical_signature) for f in reversed(same_slot)),
                    *self.pools.get((name, request.kind), []),
                )[:NEAR_DUPLICATE_POOL]
                if wanted.admits(signature)
            ),
        )
        judge = functools.partial(
            _judge,
            self.agent,
            request,
            seen,
            fingerprint=fingerprint,
            current=None,
            has_principal=True,
            derived_max_authority=None,
        )
        meaning_later = vector is ...
        embedding = None if isinstance(vector, EllipsisType) else vector
        result, findings, outcome = judge(embedding=embedding, meaning_later=meaning_later)
        if meaning_later and outcome not in ("active", "rejected"):
            ahead = self.read_ahead.get(index)
            if ahead is None:
                return None  # the model reads it first (submit_write: _ReadMeaningFirst)
            # Judged again with the model's reading, as submit_write's second pass would be.
            meaning_later, embedding = False, ahead
            result, findings, outcome = judge(embedding=embedding, meaning_later=meaning_later)
        if outcome in ("active", "pending_review") and _duplicate_id(request, seen) is not None:
            return None  # corroboration
        claims = _claims(request) if outcome != "rejected" else ()
        if claims:
            pool = sorted(
                [
                    *self.contradiction_pools.get(name, []),
                    *(
                        (f.source_observed_at, f.pk, f.statement, f.key, f.claims)
                        for f in made
                        if f.kind not in ("slot", "summary")
                    ),
                ],
                key=lambda c: (c[0], c[1]),
                reverse=True,
            )[:CONTRADICTION_POOL]
            if _contradictions(request, claims, (row[1:] for row in pool)):
                if vector is ... and self.read_ahead.get(index) is not None:
                    # Alone, its first pass would find them and be read first: skip to the second.
                    self.read_now.add(index)
                return None  # a supersession, a review or a flagged pair
        _refuse_when_queue_full(outcome, seen.waiting)

        principal = self.principals.get(name)
        new_principal = None
        if principal is None:
            # First mention: the person is inserted with this write, with an id allocated above.
            principal = new_principal = Principal(
                pk=self.principal_ids.pop(0), project=self.agent.project, external_id=name
            )
            self.principals[name] = principal
        write = _write_row(
            self.agent,
            request,
            pk=seen.write_id,
            principal=principal,
            session=None,
            idempotency_key=None,
            digest=request.digest(),
            fingerprint=fingerprint,
            authority=result.authority,
            derived=None,
            now=now,
        )
        write.findings = findings
        write.risk = _risk(findings)
        write.outcome = write.status = outcome
        if outcome in ("active", "pending_review", "quarantined"):
            write.fact = _new_fact(
                self.agent,
                write,
                principal,
                None,
                pk=seen.fact_id,
                status=outcome,
                policy_encoding=self.encoding,
                embedding=fact_vector_from_guard(request.statement, embedding),
                meaning_check_pending=meaning_later,
            )
        write.response = write_response(write, supersedes=[])
        entry = audit.next_entry(
            self.agent.project,
            "write.submitted",
            write,
            data=_entry_data(write, supersedes=(), corroborated=None),
        )
        self.taken.append(_Taken(index, request, vector, write, entry, new_principal))
        self._saw(write, now)
        if write.fact is not None and write.fact.status == "active":
            self.made.setdefault(name, []).append(write.fact)
            if write.fact.key:
                self.active_keys.add((name, write.fact.key))
        return write

    def _allocate(self, first: int) -> None:
        """Fresh ids for the writes from ``first`` on, after a write that went one by one took
        ids of its own: ids keep the batch's order, which "newest" means in every look-up.

        For ``self.ahead`` writes, which doubles with each call until a write goes one by one
        again: a run of n writes taken after one costs log2(n) calls, and what a write going one
        by one leaves unused is at most what the run before it took. Ids for all the rest of the
        batch at once made an import in which most writes go one by one (a new value for each
        person) allocate ids for ~n^2/2 writes, ~0.8 s of the server's time per batch of 500.
        """
        count = min(len(self.fingerprints) - first, self.ahead)
        self.ahead *= 2
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT ARRAY(SELECT nextval(pg_get_serial_sequence('governance_write', 'id'))"
                " FROM generate_series(1, %s)),"
                " ARRAY(SELECT nextval(pg_get_serial_sequence('governance_fact', 'id'))"
                " FROM generate_series(1, %s))",
                [count, count],
            )
            write_ids, fact_ids = cursor.fetchone()
        self.ids = {first + i: ids for i, ids in enumerate(zip(write_ids, fact_ids, strict=True))}

    def _saw(self, write: Write, now: datetime) -> None:
        """What the next writes of the agent meet because of this one."""
        if write.statement:
            self.recent.insert(0, (now, write.statement))
        if write.status in ("pending_review", "quarantined"):
            self.waiting += 1
        if write.status == "rejected":
            self.rejected.add(write.fingerprint)

    def one_by_one(
        self, index: int, request: WriteRequest, vector: tuple[float, ...] | EllipsisType | None
    ) -> Write:
        """``submit_write`` for a write that meets more than the guard, in its own savepoint."""
        if index in self.read_now:
            vector = self.read_ahead[index]
        write = submit_write(
            self.agent,
            request,
            guard_vector=vector,
            embed_later=[],  # submit_batch queues the batch's facts together
            principals=self.principals,
            read_ahead=self.read_ahead.get(index),
        )
        # Only principals of writes that stayed: a refused write's savepoint takes
        # back a principal it created.
        if write.principal is not None:
            self.principals[write.principal.external_id] = write.principal
        self.one_by_one_for.add(request.principal)
        self.ids.clear()
        self.ahead = 1
        self._saw(write, write.created_at)
        return write

    def flush(self, outcomes: list[BatchOutcome]) -> None:
        """INSERT the rows of the writes taken so far, in the batch's order, in one statement."""
        if not self.taken:
            return
        taken, self.taken = self.taken, []
        rows: list[models.Model] = [t.principal for t in taken if t.principal is not None]
        rows += [t.write.fact for t in taken if t.write.fact is not None]
        rows += [t.write for t in taken]
        rows += [t.entry for t in taken]
        # Only a new person or a new keyed active fact can meet a row another transaction
        # committed since the batch read the store (the unique indexes below); the savepoint
        # that recovers from that costs two round trips, spent only when it can be needed.
        racy = any(t.principal is not None or (t.write.fact and t.write.fact.key) for t in taken)
        try:
            with transaction.atomic() if racy else contextlib.nullcontext():
                _insert_together(*rows)
        except IntegrityError as exc:
            # Another transaction committed a person or an active fact for a key this batch
            # also makes since the batch read the store: these writes go one by one, as a
            # single write would after the same race, and so does the rest of the batch.
            if "fact_one_active_per_key" not in str(exc) and "principal_external_id_unique" not in str(exc):
                raise
            self.gave_up = True
            for t in taken:
                if t.principal is not None:
                    del self.principals[t.principal.external_id]
            for t in taken:
                try:
                    write = self.one_by_one(t.index, t.request, t.vector)
                    outcomes[t.index] = BatchOutcome(write=write, refusal=None)
                except REFUSALS as refused:
                    outcomes[t.index] = BatchOutcome(write=None, refusal=refused)
            return
        audit.seal_after_commit(self.agent.project_id)


def _refuse_unclaimable(agent: Agent, request: WriteRequest) -> None:
    """Refuse a source type this agent may not claim, or a reference that is not an identifier."""
    allowed = claimable_sources(agent)
    if request.source_type not in allowed:
        raise SourceNotAllowed(request.source_type, allowed)
    # The reference is rendered inside every item's provenance tag (R3, R10).
    problem = ref_problem(request.source_ref)
    if problem:
        raise UnknownReference("source.ref", problem)


def _judge(
    agent: Agent,
    request: WriteRequest,
    seen: Seen,
    *,
    fingerprint: str,
    current: Fact | None,
    has_principal: bool,
    derived_max_authority: int | None,
    embedding: tuple[float, ...] | None,
    extra_findings: tuple[guard.Finding, ...] = (),
    auto_approve_min_authority: int | None = None,
    meaning_later: bool = False,
) -> tuple[guard.GuardResult, list[dict[str, str]], str]:
    """The guard's verdict on a write (R4, R5, R16) against what it meets in the store:
    the result, the findings as stored, and the outcome before conflicts are considered.
    ``meaning_later``: a plain statement, whose meaning is read after (``meaning_can_wait``)."""
    assert agent.active_policy is not None, "every agent has an active policy version"
    context = guard.GuardContext(
        source_caps=supersession_rules.effective_caps(agent.project.source_caps),
        fingerprint_key=fingerprint_key(),
        rejected_fingerprints=frozenset([fingerprint]) if seen.rejected else frozenset(),
        tombstones={fingerprint: str(seen.tombstone_id)} if seen.tombstone_id is not None else {},
        tombstone_values=seen.tombstone_values,
        recent_agent_statements=seen.recent_statements,
        recent_derived_writes=seen.recent_derived,
        verified_statement_for_key=current.statement
        if current and current.confidence == "verified"
        else None,
        semantic_required=not meaning_later,
    )
    proposal = guard.WriteProposal(
        statement=request.statement,
        kind=request.kind,
        key=request.key,
        has_principal=has_principal,
        source_type=request.source_type,
        source_ref=request.source_ref,
        requested_authority=request.authority,
        derived_from_retrieval=derived_max_authority is not None,
        derived_max_authority=derived_max_authority,
        embedding=embedding,
    )
    floor = auto_approve_min_authority or agent.active_policy.policy.auto_approve_min_authority
    result = guard.check_write(proposal, context, auto_approve_min_authority=floor)
    findings = [f.to_dict() for f in (*result.findings, *extra_findings)]
    return result, findings, _escalate(result.outcome, extra_findings)


def _write_row(
    agent: Agent,
    request: WriteRequest,
    *,
    pk: int,
    principal: Principal | None,
    session: Session | None,
    idempotency_key: str | None,
    digest: str,
    fingerprint: str,
    authority: int,
    derived: RetrievalEvent | None,
    now: datetime,
) -> Write:
    """The Write row as submitted, not yet saved (its outcome is set once conflicts are known)."""
    return Write(
        pk=pk,
        project=agent.project,
        agent=agent,
        principal=principal,
        session=session,
        idempotency_key=idempotency_key,
        request_digest=digest,
        kind=request.kind,
        key=request.key,
        statement=request.statement,
        fingerprint=fingerprint,
        source_type=request.source_type,
        source_ref=request.source_ref,
        source_observed_at=request.source_observed_at,
        requested_authority=request.authority,
        authority=authority,
        valid_from=request.valid_from,
        valid_to=request.valid_to,
        derived_from_retrieval=derived,
        created_at=now,
    )


def _refuse_when_queue_full(outcome: str, waiting: int) -> None:
    """One agent cannot bury the reviewers. ``waiting`` came with the look-ups
    (``WAITING_SQL``: at most the limit); concurrent writes may overshoot the
    limit by a few: it bounds a flood, not an exact number."""
    if outcome in ("pending_review", "quarantined") and waiting >= settings.MAX_PENDING_WRITES_PER_AGENT:
        raise ReviewQueueFull(settings.MAX_PENDING_WRITES_PER_AGENT)


def _entry_data(write: Write, *, supersedes: Sequence[Fact], corroborated: Fact | None) -> dict[str, Any]:
    """What the write's audit entry says."""
    return {
        "outcome": write.outcome,
        "checks": sorted({f["check"] for f in write.findings}),
        "fact": write.fact.pk if write.fact else None,
        "supersedes": [f.pk for f in supersedes],
        "corroborates": corroborated.pk if corroborated else None,
        "statement_digest": statement_digest(write.statement),
    }


def _replay(agent: Agent, idempotency_key: str, digest: str) -> Write | None:
    existing = Write.objects.filter(agent=agent, idempotency_key=idempotency_key).first()
    if existing is None:
        return None
    if existing.request_digest != digest:
        raise IdempotencyConflict(
            f"Idempotency-Key '{idempotency_key}' was already used with a different body "
            f"(write {existing.pk})."
        )
    return existing


@transaction.atomic
def _submit(
    agent: Agent,
    request: WriteRequest,
    *,
    idempotency_key: str | None,
    digest: str,
    extra_findings: tuple[guard.Finding, ...],
    auto_approve_min_authority: int | None,
    after_create: Callable[[Write], None] | None,
    corroborate: bool,
    embedding: tuple[float, ...] | None = None,
    meaning_later: bool = False,
    now: datetime | None = None,
    embed_later: list[int] | None = None,
    principals: Mapping[str, Principal] | None = None,
) -> Write:
    project = agent.project
    assert agent.active_policy is not None, "every agent has an active policy version"
    policy = agent.active_policy.policy
    now = now or timezone.now()

    principal = (principals or {}).get(request.principal or "")
    # A write without a key or a session needs its principal only for the look-ups,
    # which read it themselves (one round trip fewer); the others lock by it first.
    read_principal = principal is None and request.principal is not None
    read_principal = read_principal and not request.key and not request.session
    if principal is None and not read_principal:
        principal = _principal(agent, request.principal)
    try:
        # A slot write locks the session so it cannot slip in while end_session
        # (which holds the same lock) is ending the session's slots.
        session = (
            open_session(agent, request.session, principal, lock=request.kind == "slot")
            if request.session
            else None
        )
    except SessionError as exc:
        raise UnknownReference(exc.field, str(exc)) from exc
    if request.kind == "slot" and session is not None and session.ended_at is not None:
        # A slot is working memory of a live session; once the session ended
        # (R8 end_of_scope) it would never be injected anyway.
        raise UnknownReference(
            "session", f"Session '{request.session}' has ended; slots belong to a live session."
        )
    derived = _derived_event(agent, request.derived_from_retrieval)
    fingerprint = statement_fingerprint(request.statement, fingerprint_key())
    # What the statement claims, compared below with the values of active facts.
    claims = _claims(request)
    slot_session = session if request.kind == "slot" else None
    current = lock_active_fact(
        project.pk,
        principal.pk if principal else None,
        slot_session.pk if slot_session else None,
        request.key,
    )
    seen = _what_the_write_meets(
        agent,
        request,
        principal_id=principal.pk if principal else None,
        principal_external_id=request.principal if read_principal else None,
        session_id=slot_session.pk if slot_session else None,
        fingerprint=fingerprint,
        now=now,
        duplicates=corroborate and current is None and not request.key,
        # Read with the look-ups when the statement claims a value that an active
        # fact may contradict (below), for one round trip fewer.
        contradiction_pool=bool(claims),
        contradiction_pool_without=current.pk if current is not None else None,
    )
    if read_principal:
        # First mention: created now, as _principal would have before the look-ups
        # (which found nothing of a principal that did not exist).
        principal = seen.principal or _principal(agent, request.principal)

    result, findings, outcome = _judge(
        agent,
        request,
        seen,
        fingerprint=fingerprint,
        current=current,
        has_principal=principal is not None,
        derived_max_authority=_derived_max_authority(derived) if derived else None,
        embedding=embedding,
        extra_findings=extra_findings,
        auto_approve_min_authority=auto_approve_min_authority,
        meaning_later=meaning_later,
    )
    write = _write_row(
        agent,
        request,
        pk=seen.write_id,
        principal=principal,
        session=session,
        idempotency_key=idempotency_key,
        digest=digest,
        fingerprint=fingerprint,
        authority=result.authority,
        derived=derived,
        now=now,
    )

    supersedes: list[Fact] = []
    fact_pending = False  # the write's new fact, not yet inserted
    # The active fact is newer than this observation: the write goes into history behind it.
    late_for: Fact | None = None
    corroborated: Fact | None = None
    # Which attribute an unkeyed supersession was about, for its stored reason.
    attribute_label: str | None = None
    # Uncertain readings: both kept, the pair goes in front of a reviewer.
    uncertain: list[tuple[Fact, contradictions.Contradiction]] = []
    if corroborate and outcome in ("active", "pending_review"):
        corroborated = _duplicate_of(request, fingerprint, current, seen)
    if corroborated is not None:
        # A near-duplicate adds no memory: it strengthens the fact it repeats.
        outcome = "active"
    elif outcome != "rejected" and (
        contradicted := _contradicted_facts(
            project.pk, principal, request, claims, exclude=current, read=seen.contradiction_pool
        )
    ):
        # R6 without a key: the statement gives another value for an attribute an
        # active fact already answers. The same supersession rules as a keyed
        # conflict decide; an uncertain reading keeps both, and retrieval then
        # injects only the newer of the pair (conflict_lost).
        for old, found in contradicted:
            incumbent = _incumbent(old)
            if not found.certain:
                uncertain.append((old, found))
                if write.conflicts_with is None:
                    write.conflicts_with = old
                findings.append(
                    {"check": POSSIBLE_CONFLICT_CHECK, "severity": "low", "detail": found.detail()}
                )
            elif outcome == "active" and supersession_rules.may_supersede(
                request.source_type, result.authority, incumbent
            ):
                if supersession_rules.arrives_late(request.source_observed_at, incumbent):
                    if late_for is None or old.source_observed_at > late_for.source_observed_at:
                        late_for = old
                else:
                    supersedes.append(old)
                    attribute_label = contradictions.ATTRIBUTE_LABELS.get(found.attribute, found.attribute)
            else:
                write.conflicts_with = old
                if outcome == "active":
                    outcome = "pending_review"
                findings.append(
                    {
                        "check": CONFLICT_CHECK,
                        "severity": "medium",
                        "detail": f"{found.detail()} "
                        + supersession_rules.conflict_detail(
                            request.source_type, result.authority, incumbent
                        ),
                    }
                )
        if outcome != "active":
            late_for = None
    if corroborated is None and current is not None and outcome != "rejected" and late_for is None:
        incumbent = _incumbent(current)
        if outcome == "active" and supersession_rules.may_supersede(
            request.source_type, result.authority, incumbent
        ):
            if supersession_rules.arrives_late(request.source_observed_at, incumbent):
                late_for = current
            else:
                supersedes.append(current)
        else:
            write.conflicts_with = current
            if outcome == "active":
                outcome = "pending_review"
            findings.append(
                {
                    "check": CONFLICT_CHECK,
                    "severity": "medium",
                    "detail": supersession_rules.conflict_detail(
                        request.source_type, result.authority, incumbent
                    ),
                }
            )
    if late_for is not None or outcome != "active":
        # A write behind a newer observation (the keyed fact's or one its words contradict)
        # supersedes nothing; nor does one that a fact it may not replace sent to a reviewer,
        # whatever the other facts allowed: it waits as a whole, and approving it decides (R6).
        supersedes = []

    if meaning_later and not _adds_a_fact_only(outcome, corroborated, supersedes, late_for, uncertain):
        raise _ReadMeaningFirst
    if corroborated is None:
        _refuse_when_queue_full(outcome, seen.waiting)

    write.findings = findings
    write.risk = _risk(findings)
    write.outcome = write.status = outcome
    # Facts read above belong to this project; saying so spares the services
    # below a query each for fact.project.
    for touched in (*supersedes, late_for, corroborated):
        if touched is not None:
            touched.project = project
    if outcome in ("active", "pending_review", "quarantined") and corroborated is None:
        # A late observation goes in inactive and record_late_observation puts it
        # behind the current fact. A superseding fact is inserted active once the
        # old one has stepped aside (one active fact per key): supersede_fact
        # leaves an already active new fact as it is.
        write.fact = _new_fact(
            agent,
            write,
            principal,
            slot_session,
            pk=seen.fact_id,
            status="pending_review" if late_for else outcome,
            policy_encoding=policy.encoding,
            embedding=fact_vector_from_guard(request.statement, embedding),
            meaning_check_pending=meaning_later,
        )
        # Saved below, with the write when nothing comes between them.
        fact_pending = not supersedes and late_for is None
        if not supersedes and late_for is not None:
            write.fact.save(force_insert=True)
    if corroborated is not None:
        write.corroborated = write.fact = corroborated

    for old in supersedes:
        assert write.fact is not None
        incumbent = _incumbent(old)
        supersede_fact(
            old,
            write.fact,
            reason=supersession_rules.supersede_reason(
                request.source_type, request.source_ref, request.key or attribute_label, incumbent
            ),
            decided_by=f"rule:{supersession_rules.supersession_rule(request.source_type, incumbent)}",
            write=write,
        )
    if supersedes:
        # The supersession rows name this fact and this write before they are
        # inserted; foreign keys are checked at commit.
        assert write.fact is not None
        write.fact.save(force_insert=True)
    if late_for is not None:
        assert write.fact is not None
        record_late_observation(write.fact, late_for, write=write)
    # The 201 body is complete here (the ids were allocated with the look-ups),
    # so it goes in with the row instead of an UPDATE after it.
    write.response = write_response(write, supersedes=[f.pk for f in supersedes])
    entry_data = _entry_data(write, supersedes=supersedes, corroborated=corroborated)
    # Uncertain readings to flag once the new fact is active.
    new_fact = write.fact if corroborated is None else None
    flags = bool(uncertain) and new_fact is not None and new_fact.status == "active"
    if corroborated is None and not flags and after_create is None:
        # Nothing happens between these rows but their INSERTs (the common
        # case: a new fact, a review, a refusal): the fact, the write and its
        # audit entry go in one statement, in the order the steps below would
        # insert them. Each round trip is a wait for the database, which on a
        # busy machine cost more than the statement itself (issue 13).
        _insert_together(
            *([write.fact] if fact_pending and write.fact is not None else []),
            write,
            audit.next_entry(project, "write.submitted", write, data=entry_data),
        )
        audit.seal_after_commit(project.pk)
        _enqueue(write, corroborated, embed_later)
        return write
    if fact_pending:
        assert write.fact is not None
        write.fact.save(force_insert=True)
    write.save(force_insert=True)
    if corroborated is not None:
        independent = supersession_rules.is_independent_evidence(
            request.source_type,
            request.source_ref,
            result.authority,
            derived=derived is not None,
            fact=_incumbent(corroborated),
        )
        corroborate_fact(
            corroborated, observed_at=request.source_observed_at, write=write, independent=independent
        )

    if flags:
        assert write.fact is not None
        # Both stay; retrieval injects only the newer direct evidence until a
        # reviewer decides (R6, services/conflicts.py).
        for old, found in uncertain:
            conflicts.flag_possible_conflict(write.fact, old, detail=found.detail(), found_by="wording")
    if after_create is not None:
        after_create(write)
    audit.record(project, "write.submitted", write, data=entry_data)
    _enqueue(write, corroborated, embed_later)
    return write


def _adds_a_fact_only(
    outcome: str,
    corroborated: Fact | None,
    supersedes: Sequence[Fact],
    late_for: Fact | None,
    uncertain: Sequence[tuple[Fact, contradictions.Contradiction]],
) -> bool:
    """Whether a write, as the patterns judged it, only adds an active fact, strengthens one, or is
    refused: what a plain statement may do before the meaning model has read it (``meaning_can_wait``).
    A second look that holds the fact later takes back no more than the fact itself; a flagged
    pair (``uncertain``) would also leave the other fact losing to it in retrieval (R6)."""
    if corroborated is not None or outcome == "rejected":
        return True
    return outcome == "active" and not supersedes and late_for is None and not uncertain


def _enqueue(write: Write, corroborated: Fact | None, embed_later: list[int] | None) -> None:
    """The new fact's embedding, queued when the transaction commits (or left to the batch)."""
    if write.fact is not None and corroborated is None:
        if embed_later is None:
            enqueue_embedding(write.fact.pk)
        else:
            embed_later.append(write.fact.pk)


def _insert_together(*rows: models.Model) -> None:
    """INSERT new rows of several tables in one statement, one round trip (``services.statements``):
    each run of rows of one model as one INSERT of a JSON document (``statements.insert_rows``);
    rows without an id get theirs in the order given. Nothing is returned: every row's id is
    known already (or, for an audit entry, unused)."""
    runs: list[list[models.Model]] = []
    for row in rows:
        if runs and type(runs[-1][0]) is type(row) and (runs[-1][0].pk is None) == (row.pk is None):
            runs[-1].append(row)
        else:
            runs.append([row])
    statements.together([part for run in runs for part in statements.insert_rows(run)])
    statements.stored(*rows)


def _escalate(outcome: str, findings: tuple[guard.Finding, ...]) -> str:
    """Findings from outside the guard can only make the outcome more cautious."""
    if outcome == "rejected" or not findings:
        return outcome
    if any(f.severity == "high" for f in findings):
        return "quarantined"
    return "pending_review" if outcome == "active" else outcome


def write_response(write: Write, *, supersedes: list[int]) -> dict[str, Any]:
    """The 201 body of POST /api/v1/writes (docs/api.md), stored for idempotent replay."""
    return {
        "id": write.pk,
        "status": write.status,
        "fact": {"id": write.fact.pk, "status": write.fact.status} if write.fact else None,
        "findings": write.findings,
        "supersedes": supersedes,
    }


def _principal(agent: Agent, external_id: str | None) -> Principal | None:
    if external_id is None:
        return None
    # Principals are created on first mention; get_or_create copes with a race.
    principal, _ = Principal.objects.get_or_create(project=agent.project, external_id=external_id)
    return principal


def _derived_event(agent: Agent, retrieval_id: int | None) -> RetrievalEvent | None:
    if retrieval_id is None:
        return None
    event = RetrievalEvent.objects.filter(pk=retrieval_id, project=agent.project).first()
    if event is None:
        raise UnknownReference("derived_from_retrieval", f"No retrieval {retrieval_id} in this project.")
    return event


def _derived_max_authority(event: RetrievalEvent) -> int:
    """R16: a write derived from a retrieval cannot exceed what it was derived from."""
    best = Fact.objects.filter(pk__in=event.selected_fact_ids).aggregate(m=Max("authority"))["m"]
    return int(best) if best else 1


def lock_active_fact(
    project_id: int,
    principal_id: int | None,
    session_id: int | None,
    key: str | None,
    *,
    exclude: int | None = None,
) -> Fact | None:
    """The active fact holding ``key`` for this principal and session slot, locked so two
    conflicting writes (or a write and an approval) cannot both supersede it."""
    if not key:
        return None
    facts = Fact.objects.select_for_update().filter(
        project_id=project_id, principal=principal_id, session=session_id, key=key, status="active"
    )
    return (facts.exclude(pk=exclude) if exclude is not None else facts).first()


def _duplicate_of(request: WriteRequest, fingerprint: str, current: Fact | None, seen: Seen) -> Fact | None:
    if current is not None:
        same = current.fingerprint == fingerprint or near_duplicate(current.statement, request.statement)
        return current if same else None
    found = _duplicate_id(request, seen)
    if found is None:
        return None
    # Locked: corroborate_fact updates it, and a withdrawal may be under way.
    return Fact.objects.select_for_update().filter(pk=found, status="active").first()


def _duplicate_id(request: WriteRequest, seen: Seen) -> int | None:
    """The active fact an unkeyed write repeats, exactly or nearly in words, among those it met."""
    if request.key:
        return None
    if seen.exact_duplicate_id is not None:
        return seen.exact_duplicate_id
    wanted = Lexical.of(normalise_statement(request.statement))
    return next(
        (pk for pk, statement in seen.candidates if Lexical.of(statement).near_duplicate(wanted)), None
    )


# Newest active facts of the same principal, session and kind compared for a
# near-duplicate in words (rules/text.py: near_duplicate).
NEAR_DUPLICATE_POOL = 200


@dataclass(frozen=True)
class Seen:
    """What a write meets in the store, read in one statement (``_what_the_write_meets``)."""

    write_id: int  # allocated, so the write and its 201 body are complete before the INSERT
    fact_id: int  # allocated likewise; unused (a gap) when the write makes no fact
    rejected: bool  # an earlier write of this assertion was rejected (R5)
    tombstone_id: int | None  # a withdrawn fact with this assertion (R8)
    tombstone_values: dict[str, frozenset[str]]  # tombstones sharing an identifying value
    recent_statements: tuple[str, ...]  # the agent's writes of the burst window, newest first
    recent_derived: int  # the agent's derived writes of the last hour (R16)
    waiting: int  # the agent's writes waiting for a reviewer, counted up to the limit
    exact_duplicate_id: int | None  # an active fact with the same fingerprint
    candidates: tuple[tuple[int, str], ...]  # newest active facts of the same slot and kind
    principal: Principal | None = None  # read with the look-ups when asked to (None: none yet)
    # The active facts an unkeyed contradiction is looked for in (id, statement, key, stored
    # claims), newest observation first; None when not read (``_contradicted_facts`` reads them).
    contradiction_pool: tuple[tuple[int, str, str | None, str | None], ...] | None = None


def _what_the_write_meets(
    agent: Agent,
    request: WriteRequest,
    *,
    principal_id: int | None,
    session_id: int | None,
    fingerprint: str,
    now: datetime,
    duplicates: bool,
    principal_external_id: str | None = None,
    contradiction_pool: bool = False,
    contradiction_pool_without: int | None = None,
) -> Seen:
    """Everything the guard and the duplicate check read, in one statement of scalar sub-queries.

    Each sub-query is one probe of an existing index: the write fingerprint
    index, tombstone_fingerprint_idx, tombstone_value_digests_idx (GIN),
    write_agent_recent_idx, write_agent_derived_idx, write_agent_waiting_proj_idx
    and, for the duplicate look-ups, fact_principal_fingerprint_idx and
    fact_active_kind_idx. Eight round trips were most of a write's statements
    (issue 13). ``duplicates`` adds the active facts an unkeyed write may
    repeat. With ``principal_external_id`` the
    principal is read here too (principal_external_id_unique), by its external id:
    one that does not exist yet has no facts and no tombstones, so its sub-queries
    compare with NULL and find nothing. ``contradiction_pool`` adds the active
    facts ``_contradicted_facts`` compares the write's claims with (but
    ``contradiction_pool_without``, a fact id): the rows its own query would
    read, in its order (fact_active_observed_idx), one round trip fewer.
    """
    project_id = agent.project_id
    digests = sorted(identifiers.value_digests(request.statement, fingerprint_key()))
    principal_params: list[Any] = []
    if principal_external_id is not None:
        principal_is = "f.principal_id = (SELECT p.id FROM p)"
    else:
        principal_is, principal_params = _equals("f.principal_id", principal_id)
    session_is, session_params = _equals("f.session_id", session_id)
    same_slot = (
        f"f.project_id = %s AND {principal_is} AND {session_is} AND f.kind = %s AND f.status = 'active'"
    )
    slot_params = [project_id, *principal_params, *session_params, request.kind]
    columns = [
        "nextval(pg_get_serial_sequence('governance_write', 'id'))",
        "nextval(pg_get_serial_sequence('governance_fact', 'id'))",
        "EXISTS (SELECT 1 FROM governance_write w WHERE w.fingerprint = %s AND w.project_id = %s"
        " AND w.status = 'rejected')",
        "(SELECT t.id FROM governance_tombstone t WHERE t.project_id = %s AND t.fingerprint = %s LIMIT 1)",
        # Only the same principal's (or, for a project fact, the project's own):
        # another person's withdrawn address says nothing about this write.
        "(SELECT json_agg(json_build_array(m.id, m.value_digests)) FROM (SELECT t.id, t.value_digests"
        " FROM governance_tombstone t JOIN governance_fact f ON f.id = t.fact_id"
        f" WHERE t.project_id = %s AND {principal_is} AND t.value_digests && %s::varchar(64)[]"
        f" LIMIT {TOMBSTONE_VALUE_MATCHES}) m)"
        if digests
        else "NULL",
        "ARRAY(SELECT w.statement FROM governance_write w WHERE w.agent_id = %s AND w.created_at >= %s"
        f" AND w.statement <> '' ORDER BY w.created_at DESC LIMIT {BURST_RECENT_STATEMENTS})",
        "(SELECT count(*) FROM governance_write w WHERE w.agent_id = %s"
        " AND w.derived_from_retrieval_id IS NOT NULL AND w.created_at >= %s)",
        WAITING_SQL,
    ]
    params: list[Any] = [
        fingerprint,
        project_id,
        project_id,
        fingerprint,
        *([project_id, *principal_params, digests] if digests else []),
        agent.pk,
        now - BURST_WINDOW,
        agent.pk,
        now - AMPLIFICATION_WINDOW,
        agent.pk,
        _waiting_cap(),
    ]
    if duplicates:
        columns += [
            # The oldest active copy in the slot. The kind is compared in the aggregate's
            # FILTER, not the WHERE: there, a plan made once for no principal in particular
            # (prepared, below) would walk the principal's facts of the kind in id order
            # (fact_active_kind_idx) looking for the copy, where the fingerprint names it.
            "(SELECT min(f.id) FILTER (WHERE f.kind = %s) FROM governance_fact f WHERE f.project_id = %s"
            f" AND {principal_is} AND {session_is} AND f.status = 'active' AND f.fingerprint = %s)",
            # The pool's facts whose signature admits a near-duplicate of this statement: the
            # others cannot be one (rules/text.py), so they are neither sent nor prepared.
            "(SELECT json_agg(json_build_array(c.id, c.statement)) FROM (SELECT f.id, f.statement,"
            f" f.lexical_signature FROM governance_fact f WHERE {same_slot} ORDER BY f.id DESC"
            f" LIMIT {NEAR_DUPLICATE_POOL}) c WHERE {ADMITS_SQL})",
        ]
        params += [request.kind, project_id, *principal_params, *session_params, fingerprint, *slot_params]
        params += _admits_params(request.statement)
    if contradiction_pool:
        # The filter, the order and the limit of _contradicted_facts' own query.
        without = "" if contradiction_pool_without is None else " AND f.id <> %s"
        columns.append(
            "(SELECT json_agg(json_build_array(c.id, c.statement, c.key, c.claims)"
            " ORDER BY c.source_observed_at DESC, c.id DESC) FROM (SELECT f.id, f.statement, f.key,"
            " f.source_observed_at, f.claims FROM governance_fact f"
            f" WHERE f.project_id = %s AND {principal_is}"
            " AND f.session_id IS NULL AND f.status = 'active' AND f.kind NOT IN ('slot', 'summary')"
            f"{without} ORDER BY f.source_observed_at DESC, f.id DESC LIMIT {CONTRADICTION_POOL}) c)"
        )
        params += [project_id, *principal_params]
        if contradiction_pool_without is not None:
            params.append(contradiction_pool_without)
    with_principal = ""
    if principal_external_id is not None:
        with_principal = (
            "WITH p AS (SELECT id, created_at, last_seen_at FROM governance_principal"
            " WHERE project_id = %s AND external_id = %s) "
        )
        columns += ["(SELECT p.id FROM p)", "(SELECT p.created_at FROM p)", "(SELECT p.last_seen_at FROM p)"]
        params = [project_id, principal_external_id, *params]
    with connection.cursor() as cursor:
        # Planned once per connection and shape (which sub-queries, NULL or a value
        # for the principal and the session): planning took longer than running it.
        prepared.execute(cursor, f"{with_principal}SELECT {', '.join(columns)}", params)
        row = cursor.fetchone()
    write_id, fact_id, rejected, tombstone_id, values, recent, derived, waiting = row[:8]
    exact, candidates = row[8:10] if duplicates else (None, None)
    pool = None
    if contradiction_pool:
        pool = tuple(
            (int(pk), str(text), key, claims) for pk, text, key, claims in _json(row[10 if duplicates else 8])
        )
    principal = None
    if principal_external_id is not None and row[-3] is not None:
        principal = Principal.from_row(
            agent.project, row[-3], principal_external_id, row[-2], row[-1], using=connection.alias
        )
    return Seen(
        write_id=write_id,
        fact_id=fact_id,
        rejected=rejected,
        tombstone_id=tombstone_id,
        tombstone_values={str(pk): frozenset(v) for pk, v in _json(values)},
        recent_statements=tuple(recent),
        recent_derived=derived,
        waiting=waiting,
        exact_duplicate_id=exact,
        candidates=tuple((int(pk), str(text)) for pk, text in _json(candidates)),
        principal=principal,
        contradiction_pool=pool,
    )


# NearDuplicateFilter.admits in SQL, over a pool row's ``c.lexical_signature`` (``_admits_params``).
ADMITS_SQL = (
    f"((c.lexical_signature >> {text_rules.VERSION_SHIFT}) <> %s"
    f" OR ((c.lexical_signature & {text_rules.EXACT_MASK}) = %s"
    f" AND (((c.lexical_signature >> {text_rules.TOKENS_SHIFT}) & {text_rules.TOKENS_MAX}) BETWEEN %s AND %s"
    f" OR ((c.lexical_signature >> {text_rules.SHINGLES_SHIFT}) & {text_rules.SHINGLES_MAX})"
    " BETWEEN %s AND %s)))"
)


def _admits_params(statement: str) -> list[int]:
    wanted = text_rules.near_duplicates_of(statement, fingerprint_key())
    # A statement without a signature of its own (too long) is compared with every fact: a
    # version no signature has makes the first test true for all of them.
    version = wanted.version or -1
    return [version, wanted.exact, *wanted.tokens, *wanted.shingles]


def _equals(column: str, value: int | None) -> tuple[str, list[Any]]:
    """``column = %s``, or ``IS NULL`` for None, so the planner can still use the index."""
    return (f"{column} IS NULL", []) if value is None else (f"{column} = %s", [value])


def _json(value: Any) -> list[Any]:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


def _contradicted_facts(
    project_id: int,
    principal: Principal | None,
    request: WriteRequest,
    claims: tuple[contradictions.Claim, ...],
    *,
    exclude: Fact | None,
    read: Sequence[tuple[int, str, str | None, str | None]] | None = None,
) -> list[tuple[Fact, contradictions.Contradiction]]:
    """Active facts about the same principal (or project) whose value this statement
    (which claims ``claims``, ``_claims``) contradicts.

    ``read``: the facts to compare with, read already (``_what_the_write_meets``).
    """
    if not claims:
        return []
    if read is not None:
        return _locked_contradicted(_contradictions(request, claims, read))
    pool = (
        Fact.objects.filter(project_id=project_id, principal=principal, session=None, status="active")
        .exclude(kind__in=("slot", "summary"))
        .order_by("-source_observed_at", "-id")
    )
    if exclude is not None:
        pool = pool.exclude(pk=exclude.pk)
    # Only what the comparison reads: whole rows (vectors included) of 200 facts
    # were most of this look-up's time.
    return _locked_contradicted(
        _contradictions(
            request, claims, pool.values_list("pk", "statement", "key", "claims")[:CONTRADICTION_POOL]
        )
    )


def _locked_contradicted(
    found: list[tuple[int, contradictions.Contradiction]],
) -> list[tuple[Fact, contradictions.Contradiction]]:
    if not found:
        return []
    # Locks what may be superseded, in id order so two writes cannot deadlock.
    rows = Fact.objects.select_for_update().filter(pk__in=[pk for pk, _ in found]).order_by("pk")
    locked = {f.pk: f for f in rows}
    return [(locked[pk], c) for pk, c in found if pk in locked and locked[pk].status == "active"]


def _claims(request: WriteRequest) -> tuple[contradictions.Claim, ...]:
    """What the write's statement claims, for comparison with the active facts' values.

    Slots and summaries are left out: a slot is one session's working state and
    a summary is checked against its own source, not against memory.
    """
    if request.kind in ("slot", "summary"):
        return ()
    return contradictions.claims_of(request.statement, request.key)


def _contradictions(
    request: WriteRequest,
    claims: tuple[contradictions.Claim, ...],
    pool: Iterable[tuple[int, str, str | None, str | None]],
) -> list[tuple[int, contradictions.Contradiction]]:
    """The facts of ``pool`` (id, statement, key, stored claims) whose value the write's statement
    contradicts. A fact's stored claims are used when they were read from its statement and key
    (``claims_from_store``), so a process meeting the pool for the first time reads no statement."""
    found: list[tuple[int, contradictions.Contradiction]] = []
    for pk, statement, key, stored in pool:
        conflict = contradictions.contradiction(
            request.statement,
            statement,
            new_claims=claims,
            old_key=key,
            old_claims=contradictions.claims_from_store(stored, statement, key),
        )
        if conflict is not None:
            found.append((pk, conflict))
    return found


def _incumbent(fact: Fact) -> supersession_rules.Incumbent:
    return supersession_rules.Incumbent(
        fact_id=fact.pk,
        statement=fact.statement,
        source_type=fact.source_type,
        authority=fact.authority,
        is_project_fact=fact.principal_id is None,
        source_ref=fact.source_ref,
        observed_at=fact.source_observed_at,
    )


def _risk(findings: list[dict[str, str]]) -> int:
    return min(99, sum(RISK_BY_SEVERITY.get(f["severity"], 0) for f in findings) * 3 + len(findings))


def _new_fact(
    agent: Agent,
    write: Write,
    principal: Principal | None,
    session: Session | None,
    *,
    pk: int,
    status: str,
    policy_encoding: str,
    embedding: list[float] | None = None,
    meaning_check_pending: bool = False,
) -> Fact:
    """The write's fact, not yet saved: its id is allocated, so the write can name it first.

    ``embedding``, when the guard's vector is the fact's own, goes in with the
    row, and the worker's task after commit only confirms it (``embedded_at``)
    and starts the similarity check, without running the model again.
    ``meaning_check_pending``: the guard's meaning model reads it after (``meaning_can_wait``).
    """
    return Fact(
        pk=pk,
        project=agent.project,
        principal=principal,
        session=session,
        kind=write.kind,
        key=write.key,
        statement=write.statement,
        source_type=write.source_type,
        source_ref=write.source_ref,
        source_observed_at=write.source_observed_at,
        writer=f"agent:{agent.slug}",
        agent=agent,
        authority=write.authority,
        valid_from=write.valid_from,
        valid_to=write.valid_to,
        recorded_at=write.created_at,
        last_verified_at=write.source_observed_at,
        status=status,
        status_reason="" if status == "active" else f"Write {status.replace('_', ' ')}",
        token_count=count_tokens(write.statement, policy_encoding),
        statement_digest=statement_digest(write.statement),
        fingerprint=write.fingerprint,
        derived_from_retrieval=write.derived_from_retrieval,
        embedding=embedding,
        meaning_check_pending=meaning_check_pending,
        lexical_signature=lexical_signature(write.statement, fingerprint_key()),
        # Read once, as the fact is stored, not by each retrieval that compares it (R6).
        claims=contradictions.stored_claims(write.statement, write.key),
    )


# Who takes the guard's second look, in the audit trail.
MEANING_CHECK_ACTOR = "system:guard"
HELD_AFTER_MEANING_CHECK = "write.held_after_meaning_check"


def complete_meaning_checks(fact_ids: Sequence[int]) -> list[int]:
    """The guard's meaning model reads the plain statements it was spared when their writes were
    answered (``meaning_can_wait``, R5); the ids of the facts it held.

    Run by the embedding task once a fact has its vector (which it reuses when
    it is the guard's own). A statement the model would have held at write time
    is held now, as the write would have been: high severity quarantines the
    fact and its write, medium sends them to a reviewer; either way the finding
    is added to the write, the fact leaves every cached session-start block
    (R12), and an audit entry says so. The others only have the flag cleared,
    all in one statement. Idempotent: a fact is read only while it still owes
    the look, and cleared or held only if its statement is still the one read,
    so a retried or duplicated task does nothing more.
    """
    facts = list(
        Fact.objects.filter(pk__in=fact_ids, meaning_check_pending=True)
        .select_related("project")
        .order_by("pk")
    )
    if not facts:
        return []
    vectors = guard_vectors_of(facts)
    clean: list[Fact] = []
    held: list[int] = []
    for fact, vector in zip(facts, vectors, strict=True):
        if vector is None:
            # The model failed: the flag stays, so the task's retry (or the sweep) reads it again.
            raise RuntimeError(f"The guard's meaning model could not read fact {fact.pk}.")
        found = _meaning_findings(fact, vector)
        if not found:
            clean.append(fact)
        elif _hold_after_second_look(fact, found):
            held.append(fact.pk)
    if clean:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE governance_fact f SET meaning_check_pending = false"
                " FROM unnest(%s::bigint[], %s::text[]) u(id, digest)"
                " WHERE f.id = u.id AND f.meaning_check_pending AND f.statement_digest = u.digest",
                [[f.pk for f in clean], [f.statement_digest for f in clean]],
            )
    return held


def _meaning_findings(fact: Fact, vector: tuple[float, ...]) -> list[dict[str, Any]]:
    """What the guard's meaning check finds in a fact's statement, as a write would have stored it."""
    proposal = guard.WriteProposal(
        statement=fact.statement,
        kind=fact.kind,
        key=fact.key,
        has_principal=fact.principal_id is not None,
        source_type=fact.source_type,
        source_ref=fact.source_ref,
        requested_authority=None,
        embedding=vector,
    )
    context = guard.GuardContext(
        source_caps=supersession_rules.effective_caps(fact.project.source_caps),
        fingerprint_key=fingerprint_key(),
        semantic_required=True,
    )
    return [f.to_dict() for f in guard.check_semantic(proposal, context)]


@transaction.atomic
def _hold_after_second_look(read: Fact, found: list[dict[str, Any]]) -> bool:
    # Locked: a withdrawal, a review or an edit may be changing the fact meanwhile.
    fact = (
        Fact.objects.select_for_update(of=("self",))
        .select_related("project")
        .filter(pk=read.pk, meaning_check_pending=True)
        .first()
    )
    if fact is None:
        return False
    Fact.objects.filter(pk=fact.pk).update(meaning_check_pending=False)
    if fact.statement_digest != read.statement_digest or fact.status != "active":
        # Edited by a reviewer, withdrawn, superseded or already held: the text the
        # write brought is no longer what memory holds, or no longer injected.
        return False
    write = (
        Write.objects.select_for_update()
        .filter(fact=fact, corroborated__isnull=True, status="active")
        .order_by("pk")
        .first()
    )
    if write is None:
        return False  # decided by a person meanwhile
    status = "quarantined" if any(f["severity"] == "high" for f in found) else "pending_review"
    now = timezone.now()
    reason = f"Held after a second look at its meaning: {found[0].get('category', 'reads like an attack')}."
    Fact.objects.filter(pk=fact.pk).update(status=status, status_reason=reason, status_changed_at=now)
    write.findings = [*found, *write.findings]
    write.risk = _risk(write.findings)
    write.status = status
    write.save(update_fields=["findings", "risk", "status"])
    session_blocks.invalidate([fact.pk])
    audit.record(
        fact.project,
        HELD_AFTER_MEANING_CHECK,
        write,
        reason=reason,
        actor=MEANING_CHECK_ACTOR,
        data={
            "outcome": status,
            "checks": sorted({f["check"] for f in found}),
            "fact": fact.pk,
            "statement_digest": statement_digest(fact.statement),
        },
    )
    return True
