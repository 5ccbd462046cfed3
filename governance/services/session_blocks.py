"""The cache of session-start blocks (R12), and the one place that drops entries from it.

R12 hands a session's start block back byte-identical on later rounds. R1, R2
and R13 always win over it, which this module secures three ways:

- a block is looked up by session, principal, identity state and policy
  version, so a round that differs in any of them never sees it;
- every service that changes a fact's eligibility (supersede, approve,
  reject, withdraw, expire, re-rate, end of scope) calls ``invalidate`` with
  the fact's id, and every block holding it is dropped in the same
  transaction;
- ``reusable`` re-checks the block's facts with the same pure eligibility
  rule retrieval uses before handing the block out, so a missed invalidation
  can never inject an ineligible fact: the block is dropped, recomputed, and
  the retrieval event says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from governance.models import PolicyVersion, Principal, Session, SessionBlock
from governance.rules import retrieval as rules
from governance.selectors import retrievals as selectors
from governance.services import statements

# What decides a block's content, and its unique key (models/sessions.py).
KEY_FIELDS = ("session", "principal", "identity_verified", "policy_version")


@dataclass(frozen=True)
class Reuse:
    """A block that may be reused, with its facts as candidates in their recorded order."""

    block: SessionBlock
    facts: list[rules.Candidate]


def invalidate(fact_ids: Iterable[int]) -> int:
    """Drop every cached block that holds any of these facts; how many were dropped."""
    return _drop("fact_ids__overlap", fact_ids)


def invalidate_hints(session_ids: Iterable[int]) -> int:
    """Drop every cached block that quotes the resume hint of one of these sessions."""
    return _drop("hint_session_id__in", session_ids)


def _drop(lookup: str, ids: Iterable[int]) -> int:
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return 0
    deleted, _ = SessionBlock.objects.filter(**{lookup: wanted}).delete()
    return deleted


def reusable(
    session: Session,
    principal: Principal | None,
    *,
    identity_verified: bool,
    version: PolicyVersion,
    now: datetime,
    read: tuple[SessionBlock | None, list[rules.Candidate]] | None = None,
) -> tuple[Reuse | None, str]:
    """The block to reuse for this round, or None and why it must be computed.

    One statement reads the block by its key and its facts by primary key,
    scoped to this project and principal (R1): a fact that moved out of scope
    is simply not found and counts as ineligible. ``read``: what that
    statement gave when the caller sent it already (with its retrieval's
    header, ``selectors.retrievals.retrieval_header``).
    """
    block, block_facts = (
        read
        if read is not None
        else selectors.cached_block(session, principal, identity_verified=identity_verified, version=version)
    )
    if block is None:
        return None, "No session-start block was cached for this person, identity state and policy version."
    found = {c.fact_id: c for c in block_facts}
    policy = version.policy
    facts: list[rules.Candidate] = []
    for fact_id in block.fact_ids:
        candidate = found.get(fact_id)
        if candidate is None:
            reason: str | None = "out of scope"
        else:
            age = rules.age_in_days(candidate.last_verified_at, now)
            reason, _ = rules.eligibility(
                candidate, age, policy, now=now, mode=block.mode, verified=identity_verified
            )
        if reason is not None:
            block.delete()
            return None, f"Recomputed: fact {fact_id} in the cached block is no longer eligible ({reason})."
        assert candidate is not None
        facts.append(candidate)
    return Reuse(block=block, facts=facts), ""


def to_store(
    session: Session,
    principal: Principal | None,
    *,
    identity_verified: bool,
    version: PolicyVersion,
    mode: str,
    plan: rules.RetrievalPlan,
    hint_session_id: int | None,
) -> SessionBlock:
    """This round's session-start block, to cache under its key (``upsert``), replacing an older one."""
    static = [item for item in plan.selected if not item.per_round]
    return SessionBlock(
        session=session,
        principal=principal,
        identity_verified=identity_verified,
        policy_version=version,
        mode=mode,
        hint_session_id=hint_session_id,
        text=plan.static_block,
        tokens=plan.static_tokens if plan.static_block else 0,
        fact_ids=[item.fact_id for item in static],
        items=[
            {"fact_id": i.fact_id, "tier": i.tier, "age_days": i.age_days, "tokens": i.tokens} for i in static
        ],
    )


def upsert(block: SessionBlock) -> statements.Statement:
    """The statement that caches ``block``: one INSERT .. ON CONFLICT DO UPDATE on its key.

    Its unique constraint treats a missing principal as a value; the retrieval
    sends it with its event (``statements.together``), where update_or_create
    sent six statements (two savepoints, a locking read, the write, two releases).
    """
    return statements.insert(
        block,
        unique_fields=KEY_FIELDS,
        update_fields=("mode", "hint_session_id", "text", "tokens", "fact_ids", "items"),
    )
