"""Scenario parsing and the five metrics (docs/quality.md), without a database."""

from __future__ import annotations

from typing import Any

import pytest

from governance.rules import evaluations as rules


def scenario(*steps: dict[str, Any], **top: Any) -> rules.Scenario:
    return rules.parse_scenario({"steps": list(steps), **top}, default_name="t")


def test_a_timeline_parses_into_typed_steps_with_the_clock_span() -> None:
    parsed = scenario(
        {"write": {"name": "a", "statement": "x", "age_days": 10}},
        {"advance": 3},
        {"retrieve": {"name": "r", "principal": "alice", "expect": "a"}},
        {"feedback": {"retrieval": "r", "used": ["a"]}},
    )
    assert [type(s).__name__ for s in parsed.steps] == [
        "WriteStep",
        "AdvanceStep",
        "RetrieveStep",
        "FeedbackStep",
    ]
    retrieve = parsed.steps[2]
    assert isinstance(retrieve, rules.RetrieveStep) and retrieve.expect == ("a",)
    assert parsed.span_days == 13
    assert parsed.thresholds == rules.DEFAULT_THRESHOLDS


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"wirte": {"statement": "x"}}], "unknown step 'wirte'"),
        ([{"write": {"statement": "x", "statment": "y"}}], "has no field statment"),
        ([{"write": {"name": "a"}}], "needs 'statement'"),
        ([{"retrieve": {"expect": ["nobody"]}}], "no earlier write named nobody"),
        ([{"feedback": {"retrieval": "r"}}], "no earlier retrieval 'r'"),
        ([{"advance": -1}], "only moves forward"),
        ([{"retrieve": {"agent": "ghost"}}], "no agent 'ghost'"),
        ([{"review": {"write": "a", "action": "maybe"}}], "'approve' or 'reject'"),
        ([{"write_many": {"count": 5, "statement": "no placeholder"}}], "statement with {n}"),
    ],
)
def test_a_mistake_in_a_scenario_is_named_not_ignored(steps: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(rules.ScenarioError, match=message.replace("(", r"\(").replace("{", r"\{")):
        scenario(*steps)


def test_thresholds_are_rates_for_known_metrics() -> None:
    with pytest.raises(rules.ScenarioError, match="unknown metric"):
        scenario({"advance": 1}, thresholds={"precision": 1})
    with pytest.raises(rules.ScenarioError, match="between 0 and 1"):
        scenario({"advance": 1}, thresholds={"recall": 2})
    assert scenario({"advance": 1}, thresholds={"recall": 0.5}).thresholds["recall"] == 0.5


def test_rates_are_ratios_of_the_counts() -> None:
    tally = rules.Tally(
        expected=4,
        expected_found=3,
        injected=8,
        contaminated=2,
        stale_injected=1,
        used=2,
        stale_used=1,
        candidates=20,
        leaked=1,
        written_active=10,
        derived_active=1,
    )
    assert rules.rates(tally) == {
        "recall": 0.75,
        "contamination": 0.25,
        "stale_adoption": 0.2,
        "cross_project_leakage": 0.05,
        "write_back_amplification": 0.1,
    }


def test_with_nothing_to_measure_recall_is_whole_and_harms_are_zero() -> None:
    assert rules.rates(rules.Tally()) == {
        "recall": 1.0,
        "contamination": 0.0,
        "stale_adoption": 0.0,
        "cross_project_leakage": 0.0,
        "write_back_amplification": 0.0,
    }


def test_missed_reads_recall_as_at_least_and_the_rest_as_at_most() -> None:
    metrics = {
        "recall": 0.94,
        "contamination": 0.0,
        "stale_adoption": 0.01,
        "cross_project_leakage": 0.0,
        "write_back_amplification": 0.05,
    }
    assert rules.missed(metrics, rules.DEFAULT_THRESHOLDS) == ["recall", "stale_adoption"]


def test_pooled_counts_weigh_each_scenario_by_its_size() -> None:
    total = rules.Tally()
    total.add(rules.Tally(expected=1, expected_found=0))
    total.add(rules.Tally(expected=9, expected_found=9, longest_chain=2))
    assert rules.rates(total)["recall"] == 0.9
    assert total.longest_chain == 2


def test_chain_length_counts_copies_of_copies() -> None:
    # 3 was derived from a retrieval that gave 2, itself derived from one that gave 1.
    parents = {3: [2, 7], 2: [1]}
    assert rules.chain_length(parents, 1) == 0
    assert rules.chain_length(parents, 2) == 1
    assert rules.chain_length(parents, 3) == 2
    assert rules.chain_length({1: [2], 2: [1]}, 1) == 2  # a cycle ends, it does not loop


def test_a_write_many_step_stands_for_numbered_single_writes() -> None:
    step = rules.WriteManyStep(count=3, statement="Fact {n} of the pile", ref="docs:pile-{n}", age_days=2.0)

    writes = step.writes()

    assert [w.statement for w in writes] == ["Fact 1 of the pile", "Fact 2 of the pile", "Fact 3 of the pile"]
    assert [w.ref for w in writes] == ["docs:pile-1", "docs:pile-2", "docs:pile-3"]
    assert {(w.agent, w.kind, w.source, w.age_days, w.principal) for w in writes} == {
        (rules.MAIN, "project_fact", "documentation", 2.0, None)
    }


def test_one_retrieval_is_tallied_from_what_it_gave_and_what_it_read() -> None:
    step = rules.RetrieveStep(
        name="r",
        expect=("home", "never"),
        expect_text=("Leeds", "Paris"),
        contaminants=("bob",),
        stale=("old",),
        forbid_text=("password",),
        stale_text=("Berlin",),
        foreign=("theirs",),
    )
    named = {"home": 1, "never": None, "bob": 2, "old": 3, "theirs": 9}
    given = [
        rules.GivenItem(1, "I live in Leeds.", about_someone_else=False, inactive=False),
        rules.GivenItem(2, "Bob likes tea.", about_someone_else=True, inactive=False),
        rules.GivenItem(3, "I lived in Berlin.", about_someone_else=False, inactive=True),
    ]
    context = "Resume: the password is hunter2.\nI live in Leeds.\nBob likes tea.\nI lived in Berlin."
    tally, notes = rules.retrieval_tally(
        step,
        label="r",
        named=named,
        given=given,
        context=context,
        candidates=[(1, False), (2, False), (3, False), (8, True), (9, False)],
        tokens=40,
    )
    assert (tally.retrievals, tally.tokens) == (1, 40)
    # "never" never became a fact, and no item says Paris.
    assert (tally.expected, tally.expected_found) == (4, 2)
    # Three items, and the forbidden phrase outside any item counts as one more.
    assert (tally.injected, tally.contaminated, tally.stale_injected) == (4, 2, 1)
    # Another project's candidate, and the one the scenario names as foreign.
    assert (tally.candidates, tally.leaked) == (5, 2)
    assert notes == [
        "r: did not give 'never'.",
        "r: the context lacks 'Paris'.",
        "r: gave forbidden item 'Bob likes tea.'.",
        "r: gave outdated item 'I lived in Berlin.'.",
        "r: the context says forbidden 'password'.",
        "r: another project's item was a candidate.",
        "r: another project's item was a candidate.",
    ]
