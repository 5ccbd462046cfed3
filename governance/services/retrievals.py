"""One retrieval, from key to logged event (DESIGN.md "Retrieval, step by step")."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.models import Agent, Principal, RetrievalCandidate, RetrievalEvent, Session
from governance.rules import guard
from governance.rules import retrieval as rules
from governance.rules.sessions import resume_hint_findings
from governance.rules.tokens import count_tokens
from governance.selectors import retrievals as selectors
from governance.services.embeddings import embed_query


class SessionMismatch(Exception):
    """The session id belongs to another principal (answered as 400)."""


@dataclass(frozen=True)
class RetrieveRequest:
    principal: str | None
    session: str | None
    query: str
    round: int
    identity_verified: bool


def retrieve(agent: Agent, request: RetrieveRequest) -> tuple[RetrievalEvent, rules.RetrievalPlan]:
    started = time.perf_counter()
    assert agent.active_policy is not None, "every agent has an active policy version"
    version = agent.active_policy
    policy = version.policy
    now = timezone.now()
    # The query is embedded before the transaction: the model call holds no locks.
    query_vector = embed_query(request.query) if request.query else None
    embedded = time.perf_counter()

    with transaction.atomic():
        principal = (
            Principal.objects.get_or_create(project=agent.project, external_id=request.principal)[0]
            if request.principal
            else None
        )
        session = _session(agent, principal, request.session) if request.session else None

        # R12: later rounds reuse the session-start block byte for byte, as long
        # as it was made under the policy version in force.
        cached = (
            session is not None
            and session.static_block is not None
            and session.static_block_policy_id == version.pk
            and request.round > 1
        )
        if cached:
            assert session is not None
            mode = session.mode
            candidates = selectors.per_round_candidates(
                agent.project, principal, session, policy, query_vector
            )
            plan = rules.plan_retrieval(
                candidates,
                policy,
                now=now,
                mode=mode,
                identity_verified=request.identity_verified,
                resume_hint=None,
                cached_static_block=session.static_block,
                cached_static_facts=selectors.cached_static_facts(session),
            )
        else:
            mode = rules.session_mode(selectors.last_interaction(principal), now, policy)
            if session is not None and session.mode:
                mode = session.mode
            candidates = [
                *selectors.static_candidates(agent.project, principal, policy, query_vector),
                *selectors.per_round_candidates(agent.project, principal, session, policy, query_vector),
            ]
            plan = rules.plan_retrieval(
                candidates,
                policy,
                now=now,
                mode=mode,
                identity_verified=request.identity_verified,
                resume_hint=_resume_hint(agent, principal, session) if mode == "resume" else None,
                cached_static_block=None,
            )
        planned = time.perf_counter()
        # The event is append-only, so its timings are what is known before it
        # is written: embedding the query, then fetching and deciding.
        timings = {
            "embed_ms": round((embedded - started) * 1000, 2),
            "plan_ms": round((planned - embedded) * 1000, 2),
            "total_ms": round((planned - started) * 1000, 2),
        }
        event = _record(
            agent, version, principal, session, request, mode, plan, timings=timings, cached=cached
        )
        if session is not None:
            _update_session(session, plan, mode, version.pk, policy.encoding, cached=cached)
        if principal is not None:
            Principal.objects.filter(pk=principal.pk).update(last_seen_at=now)
    return event, plan


def _session(agent: Agent, principal: Principal | None, external_id: str) -> Session:
    session, created = Session.objects.select_for_update().get_or_create(
        agent=agent, external_id=external_id, defaults={"project": agent.project, "principal": principal}
    )
    if not created and principal is not None and session.principal_id not in (None, principal.pk):
        raise SessionMismatch(f"Session '{external_id}' belongs to another principal.")
    return session


def _resume_hint(agent: Agent, principal: Principal | None, session: Session | None) -> str | None:
    """R9 resume: the hint left by the principal's latest ended session.

    Only the latest: an older session's hint would resume a conversation the
    person has since moved on from. A hint the write guard objects to (R5) is
    withheld rather than injected; its findings sit on the summary's write.
    """
    if principal is None:
        return None
    sessions = Session.objects.filter(principal=principal, ended_at__isnull=False)
    if session is not None:
        sessions = sessions.exclude(pk=session.pk)
    previous = sessions.order_by("-ended_at", "-id").values_list("resume_hint", flat=True).first()
    caps = {**guard.DEFAULT_SOURCE_CAPS, **(agent.project.source_caps or {})}
    if not previous or resume_hint_findings(previous, caps):
        return None
    return previous


def _record(
    agent: Agent,
    version: Any,
    principal: Principal | None,
    session: Session | None,
    request: RetrieveRequest,
    mode: str,
    plan: rules.RetrievalPlan,
    *,
    timings: dict[str, float],
    cached: bool,
) -> RetrievalEvent:
    excluded = [d for d in plan.decisions if d.decision == "excluded"]
    event = RetrievalEvent.objects.create(
        project=agent.project,
        agent=agent,
        principal=principal,
        session=session,
        policy_version=version,
        round=request.round,
        query=request.query,
        mode=mode,
        identity_verified=request.identity_verified,
        context=plan.context,
        tokens_used=plan.tokens_used,
        token_budget=plan.token_budget,
        candidate_count=len(plan.decisions),
        excluded_count=len(excluded),
        reasons=sorted({d.reason for d in excluded if d.reason}),
        static_block_cached=cached,
        timings=timings,
    )
    rank = {item.fact_id: position for position, item in enumerate(plan.selected, start=1)}
    RetrievalCandidate.objects.bulk_create(
        RetrievalCandidate(
            event=event,
            fact_id=d.fact_id,
            decision=d.decision,
            reason=d.reason,
            rank=rank.get(d.fact_id),
            tier=d.tier,
            age_days=d.age_days,
            per_round=d.per_round,
            scores={k: round(v, 6) for k, v in d.scores.items()},
            tokens=d.tokens,
        )
        for d in plan.decisions
    )
    return event


def _update_session(
    session: Session, plan: rules.RetrievalPlan, mode: str, version_id: int, encoding: str, *, cached: bool
) -> None:
    if cached:
        return
    static_ids = [item.fact_id for item in plan.selected if not item.per_round]
    Session.objects.filter(pk=session.pk).update(
        mode=mode,
        static_block=plan.static_block,
        static_block_tokens=count_tokens(plan.static_block, encoding) if plan.static_block else 0,
        static_block_fact_ids=static_ids,
        static_block_policy_id=version_id,
    )


def response_body(event: RetrievalEvent, plan: rules.RetrievalPlan) -> dict[str, Any]:
    """The 200 body of POST /api/v1/retrieve (DESIGN.md)."""
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
            for item in plan.selected
        ],
        "tokens_used": event.tokens_used,
        "token_budget": event.token_budget,
        "policy_version": event.policy_version.version,
        "candidates": event.candidate_count,
        "excluded": event.excluded_count,
    }
