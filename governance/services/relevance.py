"""The labelled relevance set, scored with the configured embedder (R14 ``low_relevance``).

``relevance_table()`` is what the policy editor and the quality harness call
to show a product manager recall and precision per relevance floor; it embeds
the set in governance/data/relevance_set.yaml with the same provider that
embeds facts and queries, so the table is true for the model in use.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from governance.embeddings import EmbeddingProvider, get_provider
from governance.rules.relevance import DEFAULT_THRESHOLDS, ScoredPair, ThresholdRow, choose_floor, tradeoff
from governance.rules.retrieval import cosine

logger = logging.getLogger(__name__)

LABELLED_SET = Path(__file__).resolve().parent.parent / "data" / "relevance_set.yaml"


@dataclass(frozen=True)
class LabelledSet:
    facts: dict[str, str]
    queries: tuple[tuple[str, frozenset[str]], ...]


@lru_cache(maxsize=1)
def labelled_set(path: Path = LABELLED_SET) -> LabelledSet:
    data = yaml.safe_load(path.read_text())
    facts = {str(k): str(v) for k, v in data["facts"].items()}
    queries = tuple((str(q["query"]), frozenset(str(f) for f in q["relevant"])) for q in data["queries"])
    unknown = {f for _, rel in queries for f in rel} - set(facts)
    if unknown:
        raise ValueError(f"Relevance set names facts it does not define: {sorted(unknown)}")
    return LabelledSet(facts, queries)


def score_pairs(
    provider: EmbeddingProvider | None = None, data: LabelledSet | None = None
) -> list[ScoredPair]:
    """Every (query, fact) pair of the set with its cosine similarity under ``provider``."""
    provider = provider or get_provider()
    data = data or labelled_set()
    fact_ids = sorted(data.facts)
    vectors = provider.embed([data.facts[f] for f in fact_ids] + [q for q, _ in data.queries])
    fact_vectors = dict(zip(fact_ids, vectors[: len(fact_ids)], strict=True))
    pairs: list[ScoredPair] = []
    for (query, relevant), qvec in zip(data.queries, vectors[len(fact_ids) :], strict=True):
        for fact_id in fact_ids:
            similarity = cosine(qvec, fact_vectors[fact_id]) or 0.0
            pairs.append(ScoredPair(query, fact_id, similarity, fact_id in relevant))
    return pairs


def relevance_table(
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    *,
    max_items: int = 20,
    provider: EmbeddingProvider | None = None,
) -> tuple[ThresholdRow, ...]:
    """Recall and precision per relevance floor on the labelled set, for the embedder in use."""
    return tradeoff(score_pairs(provider), thresholds, max_items=max_items)


def recommended_floor(provider: EmbeddingProvider | None = None) -> ThresholdRow:
    """The floor the labelled set recommends for the embedder in use (best F1)."""
    return choose_floor(relevance_table(provider=provider))


@dataclass(frozen=True)
class RelevanceTradeoff:
    """Recall and precision per relevance floor on the shipped labelled set (docs/relevance.md)."""

    rows: tuple[ThresholdRow, ...]
    recommended: float


@lru_cache(maxsize=1)
def relevance_tradeoff() -> RelevanceTradeoff | None:
    """Computed once per process: the labelled set and the embedder do not change while it runs.

    None when the embedder cannot be reached (an HTTP provider that is down):
    the policy editor then says so instead of failing.
    """
    try:
        rows = relevance_table()
    except Exception:  # the provider's own errors vary; the page must still render
        logger.exception("Could not compute the relevance table for the policy editor.")
        return None
    return RelevanceTradeoff(rows=rows, recommended=choose_floor(rows).threshold)
