"""The labelled relevance set under the shipped embedder: the default floor is the one it recommends."""

from __future__ import annotations

from governance.rules.policy import PolicySettings
from governance.rules.relevance import SHIPPED_MODEL_FLOOR
from governance.services.relevance import labelled_set, recommended_floor, relevance_table


def test_the_set_is_big_enough_to_choose_from() -> None:
    data = labelled_set()
    assert len(data.facts) >= 40 and len(data.queries) >= 13


def test_the_default_floor_is_the_one_the_labelled_set_recommends() -> None:
    best = recommended_floor()
    assert best.threshold == SHIPPED_MODEL_FLOOR == PolicySettings().min_relevance
    rows = {r.threshold: r for r in relevance_table()}
    # The old default (0.2) injected roughly two irrelevant items per relevant one.
    assert rows[0.2].precision < 0.4
    assert best.precision > 2 * rows[0.2].precision - 0.05
    assert best.recall >= 0.6
