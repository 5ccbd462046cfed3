"""Recall and precision per relevance floor (pure)."""

from __future__ import annotations

import pytest

from governance.rules.relevance import ScoredPair, ThresholdRow, choose_floor, injected_at, tradeoff


def pairs() -> list[ScoredPair]:
    # Query "meetings": two relevant facts at 0.62 and 0.41, noise at 0.33 and 0.22.
    # Query "pets": one relevant at 0.55, a relevant one the model scores low (0.18), noise at 0.29.
    return [
        ScoredPair("meetings", "a", 0.62, True),
        ScoredPair("meetings", "b", 0.41, True),
        ScoredPair("meetings", "c", 0.33, False),
        ScoredPair("meetings", "d", 0.22, False),
        ScoredPair("pets", "e", 0.55, True),
        ScoredPair("pets", "f", 0.18, True),
        ScoredPair("pets", "g", 0.29, False),
    ]


def test_recall_and_precision_per_threshold() -> None:
    rows = {r.threshold: r for r in tradeoff(pairs(), (0.2, 0.3, 0.4, 0.6, 0.7))}
    assert (rows[0.2].recall, rows[0.2].precision, rows[0.2].injected) == (0.75, 0.5, 6)
    assert (rows[0.3].recall, rows[0.3].precision) == (0.75, 0.75)
    assert (rows[0.4].recall, rows[0.4].precision) == (0.75, 1.0)
    assert (rows[0.6].recall, rows[0.6].precision) == (0.25, 1.0)
    # Nothing injected: no wrong injection, and nothing found.
    assert (rows[0.7].recall, rows[0.7].precision, rows[0.7].injected) == (0.0, 1.0, 0)


def test_max_items_caps_each_query_in_similarity_order() -> None:
    kept = injected_at(pairs(), 0.0, max_items=1)
    assert sorted(p.fact_id for p in kept) == ["a", "e"]


def test_a_relative_margin_drops_what_is_far_below_the_best_match() -> None:
    kept = injected_at(pairs(), 0.2, margin=0.25)
    assert sorted(p.fact_id for p in kept) == ["a", "b", "e"]


def test_choose_floor_prefers_f1_then_the_higher_threshold() -> None:
    assert choose_floor(tradeoff(pairs(), (0.2, 0.3, 0.4, 0.6))).threshold == 0.4
    tie = [ThresholdRow(0.3, 0.5, 0.5, 4, 2, 4), ThresholdRow(0.35, 0.5, 0.5, 4, 2, 4)]
    assert choose_floor(tie).threshold == 0.35
    with pytest.raises(ValueError):
        choose_floor([])


def test_rows_serialise_for_the_policy_editor() -> None:
    row = tradeoff(pairs(), (0.4,))[0]
    assert row.to_dict() == {
        "threshold": 0.4,
        "recall": 0.75,
        "precision": 1.0,
        "f1": 0.857,
        "injected": 3,
        "relevant_injected": 3,
        "relevant_total": 4,
    }
