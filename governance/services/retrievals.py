"""One retrieval, from key to logged event (docs/architecture.md, "The flow", step 4)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.models import (
    Agent,
    Fact,
    PolicyVersion,
    Principal,
    RetrievalEvent,
    RetrievalFeedback,
    Session,
    SessionBlock,
)
from governance.models.retrievals import SixPlaces, encode_candidate
from governance.rules import retrieval as rules
from governance.rules.provenance import REF_MAX_CHARS
from governance.rules.rendering import ResumeHint, single_line
from governance.rules.seals import EncodedCandidates
from governance.rules.sessions import HINT_SOURCE, resume_hint_findings
from governance.rules.supersession import effective_caps
from governance.selectors import retrievals as selectors
from governance.services import audit, checkpoints, session_blocks, sessions, statements
from governance.services.embeddings import embed_query

# How stale a principal's last-seen time may get before a retrieval rewrites it.
LAST_SEEN_GRANULARITY = timedelta(minutes=1)


@dataclass(frozen=True)
class RetrieveRequest:
    principal: str | None
    session: str | None
    query: str
    round: int
    identity_verified: bool


@dataclass(frozen=True)
class Retrieval:
    """What one retrieval decided, the cached session-start items included (R12, R14)."""

    plan: rules.RetrievalPlan
    decisions: tuple[rules.Decision, ...]
    selected: tuple[rules.SelectedItem, ...]
    mode: str
    cached: bool
    cache_note: str


def retrieve(
    agent: Agent, request: RetrieveRequest, *, now: datetime | None = None
) -> tuple[RetrievalEvent, Retrieval]:
    """``now`` is the moment ages and session modes are judged at: the scenario
    harness passes its own clock (docs/quality.md); everyone else gets the real time."""
    started = time.perf_counter()
    assert agent.active_policy is not None, "every agent has an active policy version"
    version = agent.active_policy
    now = now or timezone.now()
    # The query is embedded before the transaction: the model call holds no locks.
    query_vector = embed_query(request.query) if request.query else None
    embedded = time.perf_counter()

    with transaction.atomic():
        # The principal, R9's input and the project-fact cache's generation, in
        # one read; with them the session, locked, and what this round may
        # need of it: the ended sessions behind R9's resume hint (a first
        # round), or the cached start block (a later round, R12).
        header = selectors.retrieval_header(
            agent.project,
            request.principal,
            agent=agent,
            session=request.session,
            ended_sessions=request.round == 1,
            block_key=(request.identity_verified, version) if request.round > 1 else None,
            later_round=(version.policy, query_vector, now) if request.round > 1 else None,
        )
        principal = header.principal
        if request.principal and principal is None:
            principal = Principal.objects.get_or_create(project=agent.project, external_id=request.principal)[
                0
            ]
        # The row lock orders the rounds of one session, so two rounds cannot
        # both compute and cache its start block. A session this round creates
        # is stored with its R9 mode, which the first computation would set anyway.
        # A first round's new session is inserted with its candidate read
        # (one round trip fewer): it computes its start block either way, and
        # no one else can see the session before this transaction commits.
        insert_later = request.round == 1 and header.session is None
        session = (
            sessions.open_session(
                agent,
                request.session,
                principal,
                lock=True,
                # Stored only on a session this round creates.
                mode=rules.session_mode(_last_interaction(header), now, version.policy)
                if header.session is None
                else "",
                looked_up=True,
                found=header.session,
                insert_later=insert_later,
            )
            if request.session
            else None
        )
        try:
            result, block = _decide(agent, version, principal, session, request, query_vector, now, header)
        except _SessionTaken:
            # Another first round of the same new session inserted it after
            # this one's header looked: wait for it (the lock), use it as found.
            assert request.session is not None, "only a named session is inserted"
            session = sessions.open_session(agent, request.session, principal, lock=True)
            result, block = _decide(agent, version, principal, session, request, query_vector, now, header)
        planned = time.perf_counter()
        # The event is append-only, so its timings are what is known before it
        # is written: embedding the query, then fetching and deciding.
        timings = {
            "embed_ms": round((embedded - started) * 1000, 2),
            "plan_ms": round((planned - embedded) * 1000, 2),
            "total_ms": round((planned - started) * 1000, 2),
        }
        seen = principal is not None and _stale(principal.last_seen_at, now)
        event = _record(
            agent,
            version,
            principal,
            session,
            request,
            result,
            timings=timings,
            block=block,
            seen_at=now if seen else None,
        )
    return event, result


def _last_interaction(header: selectors.RetrievalHeader) -> datetime | None:
    """R9's input for the header's principal, read here when the header left part of it out."""
    if header.newest_read or header.principal is None:
        return header.last_interaction
    principal = header.principal
    newest = selectors.newest_verification(principal.project_id, principal.pk)
    return replace(header, newest_verified=newest, newest_read=True).last_interaction


def _stale(last_seen: datetime | None, now: datetime) -> bool:
    """Whether the principal's last-seen time is worth a write (R9 reads it in whole days).

    A minute's granularity spares the principal's row an UPDATE on every round
    of a conversation; a clock that moved back (the scenario harness) is followed.
    """
    return last_seen is None or not (now - LAST_SEEN_GRANULARITY < last_seen <= now)


def _decide(
    agent: Agent,
    version: PolicyVersion,
    principal: Principal | None,
    session: Session | None,
    request: RetrieveRequest,
    query_vector: list[float] | None,
    now: datetime,
    header: selectors.RetrievalHeader,
) -> tuple[Retrieval, SessionBlock | None]:
    """Reuse the session's start block when R12 allows it, else compute it (and the block to cache)."""
    policy = version.policy
    note = ""
    # What reviewers said about pairs of this person's facts that may contradict
    # each other, read with the header (a principal this retrieval creates has none).
    rulings = header.rulings

    # A later round's own candidates, when the header read them with the block
    # (for the principal and session it found, which this round then has).
    read_ahead = header.later_rows if principal is header.principal and session is header.session else None
    # A new session not stored yet (``open_session(insert_later=True)``) is
    # inserted with the candidate read, before anything needs its id.
    opening = (
        selectors.Opening(*sessions.opening_statement(session))
        if session is not None and session._state.adding
        else None
    )

    def candidates(*, session_start: bool) -> list[rules.Candidate]:
        found = selectors.candidates(
            agent.project,
            principal,
            session,
            policy,
            query_vector,
            now=now,
            session_start=session_start,
            facts_generation=header.facts_generation,
            plan_once=header.few_facts,
            later_rows=None if session_start else read_ahead,
            opening=opening,
        )
        if opening is not None:
            assert session is not None
            if opening.session_id is not None:
                sessions.adopt(session, opening.session_id)
            elif opening.sent or not sessions.insert_unless_taken(session):
                raise _SessionTaken
        return found

    if session is not None and request.round > 1:
        reuse, note = session_blocks.reusable(
            session,
            principal,
            identity_verified=request.identity_verified,
            version=version,
            now=now,
            # The header's read holds for the principal it found; one this
            # retrieval created has no block yet, and is asked for by its own id.
            read=header.block if principal is header.principal else None,
        )
        if reuse is not None:
            plan = rules.plan_retrieval(
                candidates(session_start=False),
                policy,
                now=now,
                mode=reuse.block.mode,
                identity_verified=request.identity_verified,
                resume_hint=None,
                cached_static_block=reuse.block.text,
                cached_static_facts=reuse.facts,
                rulings=rulings,
            )
            decisions, items = rules.cached_selection(reuse.facts, reuse.block.items, policy, now=now)
            return Retrieval(
                plan=plan,
                decisions=(*decisions, *plan.decisions),
                selected=(*items, *plan.selected),
                mode=reuse.block.mode,
                cached=True,
                cache_note="",
            ), None

    # R9's mode is fixed by the session's first computation: a block computed
    # again later in the session must agree with the rounds before it.
    mode = session.mode if session is not None and session.mode else None
    if mode is None:
        mode = rules.session_mode(_last_interaction(header), now, policy)
    start_candidates = candidates(session_start=True)
    hint, hint_session_id = (
        _resume_hint(agent, principal, session, now, header.ended_sessions)
        if mode == "resume"
        else (None, None)
    )
    plan = rules.plan_retrieval(
        start_candidates,
        policy,
        now=now,
        mode=mode,
        identity_verified=request.identity_verified,
        resume_hint=hint,
        cached_static_block=None,
        rulings=rulings,
    )
    block = None
    if session is not None:
        if not session.mode:
            Session.objects.filter(pk=session.pk).update(mode=mode)
        block = session_blocks.to_store(
            session,
            principal,
            identity_verified=request.identity_verified,
            version=version,
            mode=mode,
            plan=plan,
            hint_session_id=hint_session_id,
        )
    return Retrieval(
        plan=plan,
        decisions=plan.decisions,
        selected=plan.selected,
        mode=mode,
        cached=False,
        cache_note=note if request.round > 1 else "",
    ), block


class _SessionTaken(Exception):
    """The new session a first round was inserting was inserted first by another round (``retrieve``)."""


def _resume_hint(
    agent: Agent,
    principal: Principal | None,
    session: Session | None,
    now: datetime,
    ended: tuple[selectors.EndedSession, ...] | None,
) -> tuple[ResumeHint | None, int | None]:
    """R9 resume: the hint left by the principal's latest ended session, and that session's id.

    Only the latest: an older session's hint would resume a conversation the
    person has since moved on from. A hint the write guard objects to (R5) is
    withheld rather than injected; its findings sit on the summary's write.
    ``ended``: the principal's latest ended sessions as the header read them,
    or None when it did not (a later round recomputing its block).
    """
    if principal is None:
        return None, None
    if ended is None:
        ended = selectors.ended_sessions(principal)
    own = session.pk if session is not None else None
    latest = next((s for s in ended if s.pk != own), None)
    if latest is None:
        return None, None
    session_id, hint, held = latest.pk, latest.resume_hint, latest.resume_hint_held
    summary_status, summary_ref, summary_authority = (
        latest.summary_status,
        latest.summary_ref,
        latest.summary_authority,
    )
    external_id, ended_at = latest.external_id, latest.ended_at
    # A hint made with a summary waits with it: while a reviewer has the
    # summary (it dropped something, or the hint did), the hint is not given out.
    waiting = summary_status is not None and summary_status != "active"
    if not hint or held or waiting:
        return None, None
    caps = effective_caps(agent.project.source_caps)
    if resume_hint_findings(hint, caps):
        return None, None
    # Tagged like the summary it came with; a hint without a summary is the
    # summarizer's word about that session, at the summarizer's authority.
    tagged = ResumeHint(
        hint,
        source_ref=summary_ref or single_line(f"session:{external_id}")[:REF_MAX_CHARS],
        authority=summary_authority or caps[HINT_SOURCE],
        age_days=rules.age_in_days(ended_at or now, now),
    )
    return tagged, session_id


def _record(
    agent: Agent,
    version: PolicyVersion,
    principal: Principal | None,
    session: Session | None,
    request: RetrieveRequest,
    result: Retrieval,
    *,
    timings: dict[str, float],
    block: SessionBlock | None,
    seen_at: datetime | None,
) -> RetrievalEvent:
    """The retrieval event (R14), sent in one statement with the start block to cache
    (R12) and the principal's new last-seen time, when there are."""
    plan = result.plan
    excluded = [d for d in result.decisions if d.decision == "excluded"]
    created_at = timezone.now()
    rank = {item.fact_id: position for position, item in enumerate(result.selected, start=1)}
    # The candidates travel in the event's own row (one INSERT, no row per candidate),
    # encoded to JSON once for the seal and the INSERT.
    six_places = SixPlaces()
    candidate_data = EncodedCandidates(
        encode_candidate(
            d.fact_id,
            d.decision,
            d.reason,
            rank.get(d.fact_id) if d.decision == "selected" else None,
            d.tier,
            d.age_days,
            d.per_round,
            d.tokens,
            d.scores,
            six_places=six_places,
        )
        for d in result.decisions
    )
    # Sealed before the INSERT, in the same statement: no extra query, no lock
    # (RetrievalEvent's docstring says how the seal joins the trail).
    seal = checkpoints.seal_retrieval(
        agent.project_id, agent.pk, created_at, request.query, plan.context, candidate_data
    )
    # Only the selected rows are sorted by rank (a stable sort keeps their order).
    selected = sorted((row for row in candidate_data if row[1] is None), key=_rank_order)
    event = RetrievalEvent(
        project=agent.project,
        agent=agent,
        principal=principal,
        session=session,
        policy_version=version,
        round=request.round,
        query=request.query,
        mode=result.mode,
        identity_verified=request.identity_verified,
        context=plan.context,
        tokens_used=plan.tokens_used,
        token_budget=plan.token_budget,
        candidate_count=len(result.decisions),
        excluded_count=len(excluded),
        reasons=sorted({d.reason for d in excluded if d.reason}),
        static_block_cached=result.cached,
        cache_note=result.cache_note,
        timings=timings,
        created_at=created_at,
        context_seal=seal,
        candidate_data=candidate_data,
        candidate_fact_ids=[d.fact_id for d in result.decisions],
        selected_fact_ids=[row[0] for row in selected],
    )
    together: list[statements.Statement] = []
    if block is not None:
        together.append(session_blocks.upsert(block))
    if seen_at is not None:
        assert principal is not None
        together.append((_LAST_SEEN, [seen_at, principal.pk]))
    event.pk = statements.together([*together, statements.insert(event)], returning="id")
    statements.stored(event)
    return event


# R9's input: when the principal was last seen (``_stale`` says when it is worth a write).
_LAST_SEEN = "UPDATE governance_principal SET last_seen_at = %s WHERE id = %s"


def _rank_order(row: list[Any]) -> int:
    """Selected candidates by rank; a candidate without one sorts last."""
    return row[2] if row[2] is not None else 1 << 30


def response_body(event: RetrievalEvent, result: Retrieval) -> dict[str, Any]:
    """The 200 body of POST /api/v1/retrieve (docs/api.md); items include a reused block's."""
    return {
        "retrieval_id": event.pk,
        "mode": event.mode,
        "context": event.context,
        "items": [
            {
                "fact_id": item.fact_id,
                "statement": item.statement,
                "kind": item.kind,
                "source_type": item.source_type,
                "source_ref": item.source_ref,
                "authority": item.authority,
                "age_days": item.age_days,
                "tier": item.tier,
                "tokens": item.tokens,
            }
            for item in result.selected
        ],
        "tokens_used": event.tokens_used,
        "token_budget": event.token_budget,
        "policy_version": event.policy_version.version,
        "candidates": event.candidate_count,
        "excluded": event.excluded_count,
    }


class FeedbackError(Exception):
    """Feedback the retrieval cannot take (answered as 400 naming ``field``, or 409 when repeated)."""

    def __init__(self, field: str, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.conflict = conflict


# A used item in one of these states had changed by the time the agent acted
# on it: stale adoption on live traffic (docs/quality.md).
STALE_STATUSES = ("superseded", "withdrawn", "expired")


def record_feedback(
    agent: Agent, event: RetrievalEvent, *, used: list[int], wrong: list[int]
) -> RetrievalFeedback:
    """Store which injected items the agent used and which it found wrong, once per retrieval.

    Only the items the retrieval injected can be named: anything else is an id
    the agent was never given. The caller has checked the event is the agent's
    project's (R1).
    """
    injected = set(selectors.selected_fact_ids(event.pk))
    for field, ids in (("used", used), ("wrong", wrong)):
        strays = sorted(set(ids) - injected)
        if strays:
            raise FeedbackError(
                field,
                f"Retrieval {event.pk} did not give the agent "
                f"{'item' if len(strays) == 1 else 'items'} {', '.join(map(str, strays[:10]))}; "
                "feedback can name only the items it gave.",
            )
    used_ids = sorted(set(used))
    wrong_ids = sorted(set(wrong))
    with transaction.atomic():
        # The event row lock makes two racing feedbacks for one retrieval queue;
        # the second then finds the first and is refused.
        RetrievalEvent.objects.select_for_update().filter(pk=event.pk).first()
        if RetrievalFeedback.objects.filter(event=event).exists():
            raise FeedbackError("retrieval", f"Retrieval {event.pk} already has feedback.", conflict=True)
        stale = sorted(
            Fact.objects.filter(pk__in=used_ids, status__in=STALE_STATUSES).values_list("pk", flat=True)
        )
        feedback = RetrievalFeedback.objects.create(
            event=event, used=used_ids, wrong=wrong_ids, stale_used=stale
        )
        audit.record(
            event.project,
            "retrieval.feedback",
            event,
            actor=f"agent:{agent.slug}",
            data={"used": used_ids, "wrong": wrong_ids, "stale_used": stale},
        )
    return feedback
