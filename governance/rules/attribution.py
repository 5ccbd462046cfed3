"""Why didn't it know? Attribute a missing memory to storage, retrieval or use (docs/quality.md).

A missing fact is one of: never stored (or stored and then rejected,
quarantined, withdrawn, expired, superseded, ended), stored but not
retrieved (a candidate excluded for a reason, or never a candidate), or
retrieved but not used (the agent's feedback left it out). Pure: the
selector gathers what the database knows, this decides what it means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

VERDICTS = ("never_stored", "not_in_memory", "never_a_candidate", "not_retrieved", "not_used", "used")

# Plain words for the exclusion reasons (R14's vocabulary), for people.
REASON_WORDS = {
    "below_authority": "its authority is below the policy's floor",
    "stale": "it was too old to give without being re-confirmed",
    "expired": "its validity had ended",
    "not_yet_valid": "it was not valid yet",
    "superseded": "a newer fact had replaced it",
    "withdrawn": "the person had asked to forget it",
    "not_active": "it was not in memory (waiting for review, rejected or ended)",
    "kind_not_allowed": "the policy does not give this kind of memory",
    "identity_unverified": "the request did not confirm who the person was",
    "low_relevance": "it was not relevant enough to the question",
    "duplicate": "it repeated another item that was given",
    "conflict_lost": "a structured fact about the same thing won",
    "over_budget": "the token budget was full",
}
STATUS_WORDS = {
    "pending_review": "is waiting for a reviewer",
    "quarantined": "was held back by the write guard and is waiting for a reviewer",
    "rejected": "was rejected",
    "superseded": "was replaced by a newer fact",
    "withdrawn": "was withdrawn at the person's request",
    "expired": "expired",
    "out_of_scope": "ended with its session, agent or project",
}


@dataclass(frozen=True)
class CandidateTrace:
    event_id: int
    created_at: datetime
    decision: str
    reason: str | None
    used: bool | None  # None: no feedback on that retrieval


@dataclass(frozen=True)
class FactTrace:
    fact_id: int
    status: str
    status_reason: str
    statement: str
    kind: str
    candidates: Sequence[CandidateTrace]


@dataclass(frozen=True)
class WriteTrace:
    write_id: int
    status: str
    decision: str  # the reviewer's reason, or ""
    has_fact: bool


@dataclass(frozen=True)
class Attribution:
    verdict: str
    explanation: str
    fact_id: int | None = None


def attribute_fact(fact: FactTrace, *, retrievals_for_person: int, kind_allowed: bool) -> Attribution:
    """What happened to one stored fact, from its state back to its last retrieval."""
    if fact.status != "active":
        why = f" ({fact.status_reason})" if fact.status_reason else ""
        return Attribution(
            "not_in_memory",
            f"It was stored, but {STATUS_WORDS.get(fact.status, 'is not in memory')}{why}, "
            "so no agent is given it.",
            fact.fact_id,
        )
    if not fact.candidates:
        if not kind_allowed:
            why = "the agent's policy does not allow this kind of memory"
        elif retrievals_for_person == 0:
            why = "no agent has retrieved memory for this person since"
        else:
            why = (
                "the retrievals since did not consider it "
                "(for example, a per-round memory not close enough to the question)"
            )
        return Attribution(
            "never_a_candidate", f"It is in memory but was never considered: {why}.", fact.fact_id
        )
    latest = max(fact.candidates, key=lambda c: (c.created_at, c.event_id))
    if latest.decision != "selected":
        words = REASON_WORDS.get(latest.reason or "", "it was left out")
        return Attribution(
            "not_retrieved",
            f"It is in memory and was considered, but the latest retrieval (#{latest.event_id}) "
            f"left it out: {words}.",
            fact.fact_id,
        )
    if latest.used is False:
        return Attribution(
            "not_used",
            f"The latest retrieval (#{latest.event_id}) gave it to the agent, "
            "but the agent reported not using it.",
            fact.fact_id,
        )
    used = "and the agent reported using it" if latest.used else "(the agent sent no feedback on it)"
    return Attribution(
        "used",
        f"The latest retrieval (#{latest.event_id}) gave it to the agent {used}.",
        fact.fact_id,
    )


def attribute_writes(writes: Sequence[WriteTrace], *, tombstoned: bool) -> Attribution:
    """When no fact matches: a write that never became one, a withdrawal, or nothing at all."""
    if tombstoned:
        return Attribution(
            "not_in_memory",
            "It was stored and later withdrawn at the person's request; "
            "only a record that it existed remains.",
        )
    for write in writes:
        if write.status in ("rejected", "quarantined", "pending_review"):
            decision = f": {write.decision.rstrip('.')}" if write.decision else ""
            return Attribution(
                "not_in_memory",
                f"An agent offered it (write #{write.write_id}), "
                f"but it {STATUS_WORDS[write.status]}{decision}.",
            )
    return Attribution("never_stored", "Nothing like it was ever stored about this person.")
