"""Attributing a missing memory to storage, retrieval or use, without a database."""

from __future__ import annotations

from datetime import UTC, datetime

from governance.rules import attribution as rules

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fact(status: str = "active", *candidates: rules.CandidateTrace, reason: str = "") -> rules.FactTrace:
    return rules.FactTrace(7, status, reason, "Alice lives in Leeds.", "profile", candidates)


def seen(
    event: int, decision: str, reason: str | None = None, used: bool | None = None
) -> rules.CandidateTrace:
    return rules.CandidateTrace(event, T0.replace(day=event), decision, reason, used)


def test_a_fact_no_longer_in_memory_says_what_became_of_it() -> None:
    answer = rules.attribute_fact(
        fact("withdrawn", reason="asked to forget"), retrievals_for_person=3, kind_allowed=True
    )
    assert answer.verdict == "not_in_memory"
    assert "withdrawn at the person's request (asked to forget)" in answer.explanation


def test_never_a_candidate_says_why() -> None:
    assert (
        "no agent has retrieved"
        in rules.attribute_fact(fact(), retrievals_for_person=0, kind_allowed=True).explanation
    )
    assert (
        "does not allow this kind"
        in rules.attribute_fact(fact(), retrievals_for_person=2, kind_allowed=False).explanation
    )


def test_the_latest_exclusion_reason_in_plain_words() -> None:
    answer = rules.attribute_fact(
        fact("active", seen(1, "selected"), seen(2, "excluded", "over_budget")),
        retrievals_for_person=2,
        kind_allowed=True,
    )
    assert answer.verdict == "not_retrieved"
    assert "#2" in answer.explanation and "token budget was full" in answer.explanation
    assert "over_budget" not in answer.explanation


def test_given_but_not_used_comes_from_feedback() -> None:
    answer = rules.attribute_fact(
        fact("active", seen(3, "selected", used=False)), retrievals_for_person=1, kind_allowed=True
    )
    assert answer.verdict == "not_used"
    used = rules.attribute_fact(
        fact("active", seen(3, "selected", used=True)), retrievals_for_person=1, kind_allowed=True
    )
    assert used.verdict == "used"


def test_without_a_fact_the_write_decision_or_a_withdrawal_explains() -> None:
    rejected = rules.WriteTrace(4, "rejected", "A joke, not a fact.", has_fact=True)
    assert rules.attribute_writes([rejected], tombstoned=False).explanation.endswith(
        "was rejected: A joke, not a fact."
    )
    assert rules.attribute_writes([], tombstoned=True).verdict == "not_in_memory"
    assert rules.attribute_writes([], tombstoned=False).verdict == "never_stored"


def test_every_reason_has_plain_words() -> None:
    from governance.rules.retrieval import REASONS

    assert set(rules.REASON_WORDS) == set(REASONS)
