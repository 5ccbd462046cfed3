"""The audit trail's hash chain (R15) as pure functions: an entry's hash, and a chain's first broken link.

``services/audit.py`` appends entries with these hashes; ``selectors/audit.py``
reads a chain back and hands it to ``first_broken_link``. Both take any object
with an entry's fields, so the migration that re-linked the chains (0012) and
the benchmarks hash the same way as the application.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

# The previous hash of a chain's first entry.
GENESIS = "0" * 64


class ChainEntry(Protocol):
    """What an entry's hash covers, and where it stands in its chain."""

    @property
    def pk(self) -> Any: ...
    @property
    def project_id(self) -> int | None: ...
    @property
    def sequence(self) -> int | None: ...  # None until sealed
    @property
    def actor(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def object_type(self) -> str: ...
    @property
    def object_id(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def data(self) -> Any: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def previous_hash(self) -> str: ...
    @property
    def entry_hash(self) -> str: ...


def entry_digest(entry: ChainEntry) -> str:
    """The hash over an entry's content and its predecessor's hash."""
    content = {
        "project": entry.project_id,
        "sequence": entry.sequence,
        "actor": entry.actor,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "reason": entry.reason,
        "data": entry.data,
        "created_at": entry.created_at.isoformat(),
        "previous_hash": entry.previous_hash,
    }
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class BrokenLink:
    project_id: int | None
    sequence: int
    entry_id: int | None  # None when the entry is gone (a cut-off tail)
    problem: str


def first_broken_link(project_id: int | None, chain: Iterable[ChainEntry]) -> BrokenLink | None:
    """The first entry of one project's chain (given in sequence order) that breaks it, if any:
    a missing sequence number, a link to the wrong predecessor, or content that no longer hashes."""
    previous = GENESIS
    expected_sequence = 1
    for entry in chain:
        if entry.sequence is None:
            return BrokenLink(project_id, expected_sequence, entry.pk, "is not sealed into the chain")
        if entry.sequence != expected_sequence:
            return BrokenLink(
                project_id, entry.sequence, entry.pk, f"expected entry #{expected_sequence}: a row is missing"
            )
        if entry.previous_hash != previous:
            return BrokenLink(project_id, entry.sequence, entry.pk, "does not link to the entry before it")
        if entry_digest(entry) != entry.entry_hash:
            return BrokenLink(project_id, entry.sequence, entry.pk, "content does not match its hash")
        previous = entry.entry_hash
        expected_sequence += 1
    return None
