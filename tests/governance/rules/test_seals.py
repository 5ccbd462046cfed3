"""Retrieval seals: candidates encoded once seal as a plain list of them does (pure)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from governance.rules.seals import EncodedCandidates, retrieval_seal

KEY = b"k" * 32


def _seal(candidates: Any, context: str) -> str:
    return retrieval_seal(
        KEY,
        project_id=3,
        agent_id=7,
        created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        query='which "candidates":null région?',
        context=context,
        candidates=candidates,
    )


@pytest.mark.parametrize("seed", range(3))
def test_encoded_candidates_seal_as_the_list_does(seed: int) -> None:
    rng = random.Random(seed)
    rows = [
        [
            rng.randrange(1, 10**9),
            rng.choice([None, "over_budget", "duplicate"]),
            rng.choice([None, 1, 2]),
            rng.choice([None, "recent", "confirm"]),
            rng.randrange(400),
            rng.randrange(2),
            rng.randrange(60),
            *[round(rng.uniform(-1, 1), 6) + 0.0 for _ in range(4)],
        ]
        for _ in range(2_000)
    ]
    # The context may hold the very marker the encoded text is put in place of.
    context = 'Known facts: "candidates":null, naïve café ✓'
    encoded = EncodedCandidates(rows)
    assert encoded == rows
    assert _seal(encoded, context) == _seal(rows, context) == _seal(tuple(rows), context)
    assert _seal(EncodedCandidates([]), context) == _seal([], context)
    assert _seal(encoded, context) != _seal(rows[1:], context)
