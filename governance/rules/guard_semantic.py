"""The write guard's semantic layer (R5): what a statement means, not how it is spelled.

A logistic-regression head over the sentence embedding (all-MiniLM-L6-v2,
384 dimensions, unit length) scores how much a statement reads like an
attack, and the nearest labelled attack from the tuning corpus names what kind
of attack it resembles. Both were fitted by ``bench/train_guard.py`` on the
tuning split only and are stored in ``guard_data/guard_model.npz``.

Pure: the caller (the write service) computes the embedding and passes the
vector in; this module loads no model and touches no database. The weights
file is read once, at first use.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).resolve().parent / "guard_data" / "guard_model.npz"

# The corpus's category codes in the words a reviewer reads.
CATEGORY_WORDS: dict[str, str] = {
    "override": "overriding the assistant's instructions",
    "promotion": "vendor or product promotion",
    "persistence": "a lasting change to the assistant's behaviour",
    "authority": "a claim of authority or permissions",
    "reviewer_address": "a note addressed to the reviewer",
    "exfiltration": "sending data outside",
    "markup": "markup or chat role tags",
    "split_instruction": "an instruction split across sentences",
    "multilingual": "an instruction in another language",
    "encoded": "encoded or disguised text",
    "homoglyph": "look-alike letters",
    "hidden_chars": "hidden characters",
}


@dataclass(frozen=True)
class SemanticModel:
    weights: np.ndarray  # (d,)
    bias: float
    threshold_hold: float  # at or above: quarantine
    threshold_review: float  # at or above, and near a known attack: a person looks first
    review_min_similarity: float
    exemplars: np.ndarray  # (n, d) unit vectors of tuning-split attacks
    exemplar_texts: tuple[str, ...]
    exemplar_categories: tuple[str, ...]
    embedding_model: str

    @property
    def dimensions(self) -> int:
        return int(self.weights.shape[0])


@dataclass(frozen=True)
class SemanticJudgement:
    score: float  # probability that the statement is an attack
    nearest_text: str
    nearest_category: str
    nearest_similarity: float

    @property
    def category_words(self) -> str:
        return CATEGORY_WORDS.get(self.nearest_category, self.nearest_category.replace("_", " "))


@lru_cache(maxsize=1)
def load_model(path: Path = MODEL_PATH) -> SemanticModel:
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        return SemanticModel(
            weights=data["weights"].astype(np.float32),
            bias=float(data["bias"]),
            threshold_hold=float(meta["threshold_hold"]),
            threshold_review=float(meta["threshold_review"]),
            review_min_similarity=float(meta["review_min_similarity"]),
            exemplars=data["exemplars"].astype(np.float32),
            exemplar_texts=tuple(meta["exemplar_texts"]),
            exemplar_categories=tuple(meta["exemplar_categories"]),
            embedding_model=str(meta["embedding_model"]),
        )


def judge(vector: tuple[float, ...] | list[float], model: SemanticModel | None = None) -> SemanticJudgement:
    """Score one statement's embedding and find the closest known attack."""
    model = model or load_model()
    v = np.asarray(vector, dtype=np.float32)
    if v.shape != (model.dimensions,):
        raise ValueError(f"expected a {model.dimensions}-dimensional embedding, got shape {v.shape}")
    logit = float(v @ model.weights) + model.bias
    score = 1.0 / (1.0 + math.exp(-max(min(logit, 50.0), -50.0)))
    similarities = model.exemplars @ v
    best = int(np.argmax(similarities))
    return SemanticJudgement(
        score=score,
        nearest_text=model.exemplar_texts[best],
        nearest_category=model.exemplar_categories[best],
        nearest_similarity=float(similarities[best]),
    )
