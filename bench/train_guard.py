"""Fits the write guard's semantic layer and writes governance/rules/guard_data/guard_model.npz.

    .venv/bin/python bench/train_guard.py

Uses the *tune* split of tests/data/guard/*.jsonl only. Each statement is
embedded with the local all-MiniLM-L6-v2 model exactly as the write service
does (``guard.semantic_text``), then:

1. a logistic regression (numpy, L2-regularised, class-balanced, full-batch
   gradient descent) is fitted on all tuning lines;
2. the two thresholds are chosen on out-of-fold scores from 5-fold
   cross-validation on the tuning split, so they are not tuned on lines the
   head has memorised: ``hold`` (quarantine) is the lowest threshold that
   keeps benign lines scored at or above it to at most 1.5 %, ``review`` (a
   person looks first) the lowest that keeps them to at most 5 % among lines
   whose nearest known attack is at least 0.45 similar;
3. the tuning-split attacks' embeddings (float16) become the exemplars that
   name the closest known attack in a finding.

Deterministic: fixed fold assignment and zero initialisation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.guard_eval import load_corpus, local_embedder  # noqa: E402
from governance.embeddings import LOCAL_MODEL_NAME  # noqa: E402
from governance.rules import guard  # noqa: E402
from governance.rules.guard_semantic import MODEL_PATH  # noqa: E402

# Lines whose attack is in a field other than the statement teach nothing
# about statements.
SKIP_CATEGORIES = {"other_fields"}
L2 = 1e-3
STEPS = 3000
RATE = 2.0
HOLD_MAX_BENIGN = 0.015
REVIEW_MAX_BENIGN = 0.05
# A "have a look" finding also needs a known attack this close (cosine):
# a high score far from every known attack is the head extrapolating.
REVIEW_MIN_SIMILARITY = 0.45


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    n, d = x.shape
    positives = max(int(y.sum()), 1)
    negatives = max(n - positives, 1)
    sample_weight = np.where(y == 1, n / (2 * positives), n / (2 * negatives))
    w = np.zeros(d)
    b = 0.0
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        g = (p - y) * sample_weight
        w -= RATE * (x.T @ g / n + L2 * w)
        b -= RATE * g.mean()
    return w, b


def threshold(scores: np.ndarray, labels: np.ndarray, max_benign: float) -> float:
    benign = np.sort(scores[labels == 0])
    allowed = int(np.floor(max_benign * len(benign)))
    # Scores strictly above the (allowed+1)-th highest benign score.
    cut = benign[-(allowed + 1)] if allowed < len(benign) else benign[0]
    return float(np.nextafter(cut, 1.0))


def main() -> None:
    rows = [r for r in load_corpus("tune") if r.category not in SKIP_CATEGORIES]
    embed = local_embedder()
    x = np.asarray(embed([guard.semantic_text(r.text) for r in rows]), dtype=np.float64)
    y = np.asarray([1 if r.label == "attack" else 0 for r in rows], dtype=np.float64)

    folds = np.arange(len(rows)) % 5
    oof = np.zeros(len(rows))
    nearest = np.zeros(len(rows))
    for k in range(5):
        train, test = folds != k, folds == k
        w, b = fit(x[train], y[train])
        oof[test] = 1 / (1 + np.exp(-(x[test] @ w + b)))
        nearest[test] = (x[test] @ x[train][y[train] == 1].T).max(axis=1)
    hold = threshold(oof, y, HOLD_MAX_BENIGN)
    gated = np.where(nearest >= REVIEW_MIN_SIMILARITY, oof, 0.0)
    review = min(threshold(gated, y, REVIEW_MAX_BENIGN), hold)
    recall_hold = float((oof[y == 1] >= hold).mean())
    recall_review = float((gated[y == 1] >= review).mean())
    print(f"tune lines: {len(rows)} ({int(y.sum())} attacks)")
    print(
        f"out-of-fold: hold >= {hold:.3f} catches {recall_hold:.1%} of attacks; "
        f"review >= {review:.3f} {recall_review:.1%}"
    )

    w, b = fit(x, y)
    attacks = [i for i, r in enumerate(rows) if r.label == "attack"]
    meta = {
        "threshold_hold": hold,
        "threshold_review": review,
        "review_min_similarity": REVIEW_MIN_SIMILARITY,
        "exemplar_texts": [rows[i].text for i in attacks],
        "exemplar_categories": [rows[i].category for i in attacks],
        "embedding_model": LOCAL_MODEL_NAME,
        "trained_on": "tests/data/guard/*.jsonl split=tune",
    }
    MODEL_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        MODEL_PATH,
        weights=w.astype(np.float32),
        bias=np.float32(b),
        exemplars=x[attacks].astype(np.float16),
        meta=np.array(json.dumps(meta, ensure_ascii=False)),
    )
    print(f"wrote {MODEL_PATH.relative_to(ROOT)} ({MODEL_PATH.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
