"""The seven questions as pure rules: what a policy answers and what it leaves open."""

from __future__ import annotations

from dataclasses import replace

from governance.rules.policy import PolicySettings
from governance.rules.questions import Traffic, is_weak_identifier, seven_questions

TUNED = replace(
    PolicySettings(),
    token_budget=800,
    weight_relevance=0.5,
    weight_freshness=0.3,
    session_resume_days=7,
)
BUSY = Traffic(
    days=30,
    retrievals=10,
    first_rounds=4,
    later_rounds=6,
    later_reused=3,
    identity_verified=10,
    p50_tokens=200.0,
    p95_tokens=760.0,
    modes={"resume": 3, "new": 1},
    feedback=5,
    principals=4,
)


def test_a_tuned_policy_with_feedback_answers_all_seven():
    questions = seven_questions(TUNED, BUSY)
    assert [q.number for q in questions] == [1, 2, 3, 4, 5, 6, 7]
    assert all(q.answered for q in questions), [q.open for q in questions]
    budget = dict(questions[3].answers)
    assert budget["Budget configured"] == "800 tokens"
    assert budget["95th percentile tokens per round"] == "760 tokens (95% of the budget)"
    assert dict(questions[5].answers)["Sessions that resumed where the last one left off"] == "3 of 4 (75%)"
    assert dict(questions[6].answers)["Later rounds that reused the session-start block byte for byte"] == (
        "3 of 6 (50%)"
    )


def test_defaults_identity_off_and_silence_leave_questions_open():
    policy = replace(PolicySettings(), require_identity_verification=False, min_authority=1)
    silent = replace(BUSY, feedback=0, weak_principals=2)
    open_numbers = [q.number for q in seven_questions(policy, silent) if not q.answered]
    assert open_numbers == [2, 3, 4, 5, 6, 7]
    guard = seven_questions(policy, silent)[4]
    assert any("authority floor is 1" in point for point in guard.open)


def test_no_traffic_is_a_note_not_a_gap():
    question = seven_questions(TUNED, Traffic(days=30))[3]
    assert question.answered
    assert question.notes == ("No retrieval in this period: nothing measured yet.",)
    assert dict(question.answers)["Median tokens per round"] == "—"


def test_weak_identifiers():
    assert is_weak_identifier("alice") and is_weak_identifier("u-1") and is_weak_identifier("Bartholomew")
    assert not is_weak_identifier("crm:4417-2210") and not is_weak_identifier("alice@example.com")
