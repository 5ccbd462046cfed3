"""Recall and precision of the relevance floor, per threshold (R14's ``low_relevance``). Pure: no ORM.

Per-round kinds (episodic memory) are injected only when their cosine
similarity to the query reaches the policy's ``min_relevance``. Too low a
floor injects noise ("recurring meetings" brought 12 items for 2 targets);
too high a floor misses what the agent needed. These functions turn a
labelled set's similarity scores into the trade-off a product manager sees
in the policy editor and the quality harness:

- ``tradeoff``: for each threshold, recall (share of the relevant facts
  injected), precision (share of the injected facts that were relevant) and
  how many items were injected, over all queries (micro-averaged, as an
  agent experiences them), with the policy's ``max_items`` cap applied per
  query in similarity order, as retrieval does.
- ``choose_floor``: the threshold with the best F1 (recall and precision
  weighed equally), ties to the higher threshold, since an injected
  irrelevant item costs tokens and can mislead (R13's spirit).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(2, 13))
# The floor choose_floor picks for the shipped local model (all-MiniLM-L6-v2)
# on governance/data/relevance_set.yaml; docs/relevance.md has the table.
# tests/governance/services/test_relevance.py recomputes it, so a change of
# model or set that moves the best floor fails there rather than drifting.
SHIPPED_MODEL_FLOOR = 0.35


@dataclass(frozen=True)
class ScoredPair:
    """One (query, fact) pair of a labelled set with the embedder's similarity."""

    query: str
    fact_id: str
    similarity: float
    relevant: bool


@dataclass(frozen=True)
class ThresholdRow:
    threshold: float
    recall: float
    precision: float
    injected: int  # items injected over all queries
    relevant_injected: int
    relevant_total: int

    @property
    def f1(self) -> float:
        total = self.recall + self.precision
        return 0.0 if total == 0 else 2 * self.recall * self.precision / total

    def to_dict(self) -> dict[str, float | int]:
        return {
            "threshold": self.threshold,
            "recall": round(self.recall, 3),
            "precision": round(self.precision, 3),
            "f1": round(self.f1, 3),
            "injected": self.injected,
            "relevant_injected": self.relevant_injected,
            "relevant_total": self.relevant_total,
        }


def _by_query(pairs: Iterable[ScoredPair]) -> dict[str, list[ScoredPair]]:
    grouped: dict[str, list[ScoredPair]] = defaultdict(list)
    for pair in pairs:
        grouped[pair.query].append(pair)
    for items in grouped.values():
        items.sort(key=lambda p: (-p.similarity, p.fact_id))
    return grouped


def injected_at(
    pairs: Sequence[ScoredPair], threshold: float, *, max_items: int = 20, margin: float | None = None
) -> list[ScoredPair]:
    """What retrieval would inject at ``threshold``: per query, at most ``max_items`` in similarity order.

    ``margin`` is the reranking step measured beside the plain floor: keep only
    items within ``margin`` of the query's best match (a relative floor).
    """
    kept: list[ScoredPair] = []
    for items in _by_query(pairs).values():
        best = items[0].similarity if items else 0.0
        above = [
            p
            for p in items
            if p.similarity >= threshold and (margin is None or p.similarity >= best - margin)
        ]
        kept.extend(above[:max_items])
    return kept


def tradeoff(
    pairs: Sequence[ScoredPair],
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    *,
    max_items: int = 20,
    margin: float | None = None,
) -> tuple[ThresholdRow, ...]:
    """Recall and precision at each threshold (see the module note)."""
    relevant_total = sum(1 for p in pairs if p.relevant)
    rows: list[ThresholdRow] = []
    for threshold in thresholds:
        kept = injected_at(pairs, threshold, max_items=max_items, margin=margin)
        hits = sum(1 for p in kept if p.relevant)
        rows.append(
            ThresholdRow(
                threshold=threshold,
                recall=hits / relevant_total if relevant_total else 0.0,
                # Nothing injected is not a wrong injection: precision 1.0.
                precision=hits / len(kept) if kept else 1.0,
                injected=len(kept),
                relevant_injected=hits,
                relevant_total=relevant_total,
            )
        )
    return tuple(rows)


def choose_floor(rows: Sequence[ThresholdRow]) -> ThresholdRow:
    """The row with the best F1; on a tie, the higher threshold (fewer items injected)."""
    if not rows:
        raise ValueError("No thresholds to choose from.")
    return max(rows, key=lambda r: (round(r.f1, 6), r.threshold))
