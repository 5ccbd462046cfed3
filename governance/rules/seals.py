"""Seals: keyed digests that tie a stored row's text to the key only the application holds.

A retrieval event keeps the exact text an agent was given (``query`` and
``context``) and its candidates' decisions and scores. That text is erasable
(withdrawal redacts it), so it cannot go into the hash-chained audit trail
itself, and a plain hash of it would let anyone holding an export confirm a
guessed statement. Its seal is an HMAC with ``settings.AUDIT_CHECKPOINT_KEY``
over the text, the candidates and the event's identity, so someone with only
the database can neither recompute it after editing the text nor move a sealed text to another event.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any


def retrieval_seal(
    key: bytes,
    *,
    project_id: int,
    agent_id: int,
    created_at: datetime,
    query: str,
    context: str,
    candidates: Sequence[Any] | None = None,
) -> str:
    content = {
        "project": project_id,
        "agent": agent_id,
        # Fixed form, so the time reads the same back from the database.
        "created_at": created_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "query": query,
        "context": context,
    }
    if candidates is not None:
        # The event's candidates (their stored form): a decision, reason or score
        # edited in the database no longer matches the seal either. The application
        # always passes them; None is the form before they moved into the event,
        # which migration 0017 still computes.
        content["candidates"] = None if isinstance(candidates, EncodedCandidates) else list(candidates)
    canonical = _canonical(content)
    if isinstance(candidates, EncodedCandidates):
        # Their text is the one json.dumps would put there (a list has no keys to
        # sort); with the keys sorted only the agent's id comes before them, so
        # the first marker is theirs.
        head, _, tail = canonical.partition('"candidates":null')
        canonical = f'{head}"candidates":{candidates.json}{tail}'
    return hmac.new(key, canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class EncodedCandidates(list[Any]):
    """A retrieval event's candidates in their stored form, with their JSON text made once.

    A large principal's event has thousands of candidates; the seal covers this
    text and the event's INSERT sends it (models/retrievals.py), where each
    encoded them again.
    """

    def __init__(self, rows: Iterable[Any]) -> None:
        super().__init__(rows)
        self.json = _canonical(self)
