"""What-if replay's pure pieces: facts as of a time, reading recorded contexts, comparing, tallying."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance.rules import rendering
from governance.rules.policy import PolicySettings
from governance.rules.replay import (
    NOT_RECORDED,
    EventComparison,
    FactSnapshot,
    ItemChange,
    Outcome,
    ReplayTally,
    compare_event,
    distribution,
    erased_statement,
    histogram,
    percentile,
    resume_hint_of,
    side_by_side,
    snapshot_at,
    static_block_of,
    to_candidate,
)
from governance.rules.retrieval import Candidate, plan_retrieval

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def snap(fact_id: int = 1, at: datetime = NOW - 40 * DAY, **overrides: Any) -> FactSnapshot:
    values: dict[str, Any] = {
        "at": at,
        "fact_id": fact_id,
        "kind": "preference",
        "key": None,
        "statement": f"Remembered detail {fact_id}",
        "status": "active",
        "is_project_fact": False,
        "source_type": "user_statement",
        "source_ref": f"chat:{fact_id}",
        "authority": 4,
        "confidence": "unverified",
        "valid_from": None,
        "valid_to": None,
        "last_verified_at": NOW - 20 * DAY,
        "recorded_at": at,
    }
    values.update(overrides)
    at, recorded_at = values.pop("at"), values.pop("recorded_at")
    return FactSnapshot(at=at, recorded_at=recorded_at, fact=Candidate(**values))


# --- facts as they stood ---------------------------------------------------


def test_snapshot_at_takes_the_last_row_written_at_or_before_the_time():
    created = snap(at=NOW - 10 * DAY, status="pending_review")
    approved = snap(at=NOW - 5 * DAY, recorded_at=created.recorded_at, status="active")
    superseded = snap(at=NOW - 1 * DAY, recorded_at=created.recorded_at, status="superseded")
    history = [created, approved, superseded]

    def status(at: datetime) -> str | None:
        row = snapshot_at(history, at)
        return row.fact.status if row else None

    assert status(NOW - 11 * DAY) is None  # not recorded yet
    assert status(NOW - 7 * DAY) == "pending_review"
    assert status(NOW - 5 * DAY) == "active"  # a row stamped exactly then counts
    assert status(NOW - 2 * DAY) == "active"
    assert status(NOW) == "superseded"


def test_snapshot_at_of_a_fact_recorded_after_the_time_is_none():
    # A current-row stand-in (no history) carries its recorded_at: it must not leak into the past.
    assert snapshot_at([snap(at=NOW - 10 * DAY, recorded_at=NOW - 3 * DAY)], NOW - 5 * DAY) is None
    assert snapshot_at([], NOW) is None


def test_erased_statements_get_a_unique_placeholder_so_they_are_not_duplicates():
    first, second = to_candidate(snap(1, statement=""), None), to_candidate(snap(2, statement=""), None)
    assert first.statement == erased_statement(1) == "[withdrawn fact #1]"
    assert first.statement != second.statement
    plan = plan_retrieval(
        [first, second],
        PolicySettings(),
        now=NOW,
        mode="resume",
        identity_verified=True,
        resume_hint=None,
        cached_static_block=None,
    )
    assert [d.reason for d in plan.decisions] == [None, None]


def test_to_candidate_keeps_state_and_relevance():
    candidate = to_candidate(snap(7, status="superseded", authority=2, is_project_fact=True), 0.42)
    assert (candidate.fact_id, candidate.status, candidate.authority, candidate.is_project_fact) == (
        7,
        "superseded",
        2,
        True,
    )
    assert candidate.relevance == 0.42


# --- reading back recorded contexts -----------------------------------------


class Item:
    def __init__(self, statement: str) -> None:
        self.statement, self.source_ref, self.authority, self.age_days, self.tier = (
            statement,
            "chat:1",
            4,
            1,
            "recent",
        )


def test_static_block_and_resume_hint_are_read_back_from_a_recorded_context():
    static = rendering.render_static_block("resume", "Was comparing\nplans", [], [Item("Likes tea")])
    round_ = rendering.render_round_block([Item("Asked about invoices")])
    context = rendering.join_context(static, round_)

    assert static_block_of(context) == static
    assert resume_hint_of(context) == rendering.ResumeHint("Was comparing plans")
    assert static_block_of(round_) == ""
    assert static_block_of("") == ""
    assert resume_hint_of(rendering.render_static_block("resume", None, [], [Item("x")])) is None
    assert resume_hint_of(rendering.render_static_block("confirm", "ignored in confirm mode", [], [])) is None


# --- comparing -----------------------------------------------------------


def test_compare_event_reports_added_and_dropped_items_with_the_other_sides_reason():
    before = [
        Outcome(1, "selected", None),
        Outcome(2, "selected", None),
        Outcome(3, "excluded", "over_budget"),
    ]
    after = [Outcome(1, "selected", None), Outcome(2, "excluded", "stale"), Outcome(3, "selected", None)]

    comparison = compare_event(
        9, before, after, {1: "profile", 2: "preference", 3: "incident"}, tokens_before=120, tokens_after=90
    )

    assert comparison.changed
    assert comparison.dropped == (ItemChange(2, "preference", "stale"),)
    assert comparison.added == (ItemChange(3, "incident", "over_budget"),)
    assert comparison.reasons_before == {"over_budget": 1}
    assert comparison.reasons_after == {"stale": 1}
    assert (comparison.tokens_before, comparison.tokens_after) == (120, 90)


def test_same_selection_is_unchanged_even_when_reasons_differ():
    before = [Outcome(1, "selected", None), Outcome(2, "excluded", "stale")]
    after = [Outcome(1, "selected", None), Outcome(2, "excluded", "below_authority")]
    comparison = compare_event(1, before, after, {}, tokens_before=50, tokens_after=50)
    assert not comparison.changed
    assert comparison.reasons_before != comparison.reasons_after


def test_a_fact_missing_on_one_side_reads_as_not_recorded():
    comparison = compare_event(
        1, [Outcome(5, "selected", None)], [], {5: "profile"}, tokens_before=1, tokens_after=0
    )
    assert comparison.dropped == (ItemChange(5, "profile", NOT_RECORDED),)


def test_lowering_confirm_days_drops_only_confirm_tier_items_as_stale():
    """The issue's must-show, on plain data: 30 -> 10 days drops the 20-day fact, keeps the 5-day one."""
    facts = [
        to_candidate(snap(1, last_verified_at=NOW - 5 * DAY), None),
        to_candidate(snap(2, last_verified_at=NOW - 20 * DAY), None),
        to_candidate(snap(3, last_verified_at=NOW - 45 * DAY), None),
    ]

    def outcomes(policy: PolicySettings) -> tuple[list[Outcome], int]:
        plan = plan_retrieval(
            facts,
            policy,
            now=NOW,
            mode="resume",
            identity_verified=True,
            resume_hint=None,
            cached_static_block=None,
        )
        return [Outcome(d.fact_id, d.decision, d.reason) for d in plan.decisions], plan.tokens_used

    before, tokens_before = outcomes(PolicySettings(confirm_days=30))
    after, tokens_after = outcomes(PolicySettings(confirm_days=10))
    comparison = compare_event(1, before, after, {}, tokens_before=tokens_before, tokens_after=tokens_after)

    assert [c.fact_id for c in comparison.dropped] == [2]
    assert [c.reason for c in comparison.dropped] == ["stale"]
    assert comparison.added == ()
    assert tokens_after < tokens_before
    assert comparison.reasons_before == {"stale": 1} and comparison.reasons_after == {"stale": 2}


def test_replaying_under_the_same_policy_changes_nothing():
    facts = [to_candidate(snap(i, last_verified_at=NOW - i * 3 * DAY), None) for i in range(1, 15)]
    policy = PolicySettings(token_budget=200)
    plan = plan_retrieval(
        facts,
        policy,
        now=NOW,
        mode="resume",
        identity_verified=True,
        resume_hint=None,
        cached_static_block=None,
    )
    again = plan_retrieval(
        facts,
        policy,
        now=NOW,
        mode="resume",
        identity_verified=True,
        resume_hint=None,
        cached_static_block=None,
    )
    outcomes = [Outcome(d.fact_id, d.decision, d.reason) for d in plan.decisions]
    replayed = [Outcome(d.fact_id, d.decision, d.reason) for d in again.decisions]
    assert not compare_event(1, outcomes, replayed, {}, tokens_before=1, tokens_after=1).changed
    assert any(o.reason == "over_budget" for o in outcomes)  # the budget did bite, so this is not vacuous


# --- distributions and the tally ---------------------------------------------


def test_percentile_and_distribution():
    values = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert percentile(sorted(values), 0.5) == 50
    assert percentile(sorted(values), 0.9) == 90
    assert percentile([], 0.5) == 0
    assert distribution(values) == {
        "count": 10,
        "total": 550,
        "mean": 55.0,
        "min": 10,
        "p50": 50,
        "p90": 90,
        "max": 100,
    }
    assert distribution([])["count"] == 0


def test_histogram_puts_both_series_on_the_same_bins():
    result = histogram([0, 5, 99, 100], [50], bins=4)
    assert result["edges"] == [0, 25, 50, 75, 100]
    assert result["before"] == [2, 0, 0, 2]  # the maximum falls in the last bin
    assert result["after"] == [0, 0, 1, 0]
    assert sum(histogram([], [], bins=3)["before"]) == 0


def comparison(
    event_id: int, *, dropped: tuple[ItemChange, ...] = (), added: tuple[ItemChange, ...] = ()
) -> Any:
    return EventComparison(
        event_id=event_id,
        added=added,
        dropped=dropped,
        tokens_before=100,
        tokens_after=80 if dropped else 100,
        reasons_before={"over_budget": 1},
        reasons_after={"stale": len(dropped)} if dropped else {},
    )


def test_tally_counts_changed_events_items_and_reasons():
    tally = ReplayTally()
    tally.add(comparison(1, dropped=(ItemChange(5, "preference", "stale"),)), {"principal": "alice"})
    tally.add(comparison(2))
    tally.add(comparison(3, added=(ItemChange(6, "profile", "over_budget"),)))

    result = tally.result()

    assert (result["events"], result["changed_events"], result["unchanged_events"]) == (3, 2, 1)
    assert (result["items_dropped"], result["items_added"]) == (1, 1)
    assert result["dropped_by_reason"] == {"stale": 1}
    assert result["added_by_reason"] == {"over_budget": 1}
    assert result["exclusions"] == {"before": {"over_budget": 3}, "after": {"stale": 1}}
    assert result["tokens"]["before"]["total"] == 300 and result["tokens"]["after"]["total"] == 280
    assert [row["event_id"] for row in result["changed"]] == [1, 3]
    assert result["changed"][0]["principal"] == "alice"
    assert result["changed"][0]["dropped"] == [{"fact_id": 5, "kind": "preference", "reason": "stale"}]
    assert result["changed_truncated"] is False


def test_tally_bounds_the_stored_rows_but_not_the_counts():
    tally = ReplayTally(changed_limit=2)
    for event_id in range(5):
        tally.add(comparison(event_id, dropped=(ItemChange(1, "profile", "stale"),)))
    result = tally.result()
    assert result["changed_events"] == 5
    assert len(result["changed"]) == 2
    assert result["changed_truncated"] is True


@pytest.mark.parametrize("approximate", [True, False])
def test_tally_counts_approximate_events(approximate):
    tally = ReplayTally()
    tally.add(replace(comparison(1), approximate=approximate))
    assert tally.result()["approximate_events"] == int(approximate)


def test_a_tagged_hint_reads_back_with_its_provenance() -> None:
    hint = rendering.ResumeHint("Was comparing plans", source_ref="session:s-1#1..9", authority=2, age_days=3)
    static = rendering.render_static_block("resume", hint, [], [Item("Likes tea")])
    assert (
        "Last session: Was comparing plans [SOURCE: session:s-1#1..9 | AUTHORITY: 2 | AGE: 3 days]" in static
    )
    back = resume_hint_of(static)
    assert back == rendering.ResumeHint("Was comparing plans", "session:s-1#1..9", 2, 3)
    # Re-rendering what was read back gives the same bytes: replay stays faithful.
    assert rendering.render_static_block("resume", back, [], [Item("Likes tea")]) == static


# --- one retrieval under two policies (the policy editor's ranking preview) ---------------


def test_side_by_side_places_each_candidate_under_both_plans() -> None:
    fresh = to_candidate(snap(1, last_verified_at=NOW - 1 * DAY), 0.2)
    relevant = to_candidate(snap(2, last_verified_at=NOW - 20 * DAY), 0.9)
    too_old = to_candidate(snap(3, last_verified_at=NOW - 400 * DAY), 0.9)
    candidates = [fresh, relevant, too_old]

    def plan(policy: PolicySettings) -> Any:
        return plan_retrieval(
            candidates,
            policy,
            now=NOW,
            mode="resume",
            identity_verified=True,
            resume_hint=None,
            cached_static_block=None,
        )

    published = plan(PolicySettings(weight_relevance=0.0, weight_freshness=1.0, weight_confidence=0.0))
    draft = plan(
        PolicySettings(weight_relevance=1.0, weight_freshness=0.0, weight_confidence=0.0, max_items=1)
    )
    assert published.ranked == (1, 2) and draft.ranked == (2, 1)

    rows = {row.fact_id: row for row in side_by_side(candidates, published, draft)}
    assert [row.fact_id for row in side_by_side(candidates, published, draft)] == [2, 1, 3]
    assert rows[2].moved == 1 and rows[2].draft.injected and not rows[2].changed
    assert rows[1].moved == -1 and rows[1].places == 1 and rows[1].changed
    assert rows[1].draft.reason == "over_budget" and rows[1].draft.rank == 2
    # Left out before ranking (too old to inject at all): no rank, no score, on either side.
    assert rows[3].published.rank is None and rows[3].draft.score is None and rows[3].moved == 0
    assert rows[3].published.reason == rows[3].draft.reason == "stale"
