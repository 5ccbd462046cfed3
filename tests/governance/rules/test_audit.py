"""The audit chain's hashes and its first broken link (pure; the stored chain is selectors/audit)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from governance.rules.audit import GENESIS, BrokenLink, entry_digest, first_broken_link

START = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Entry:
    pk: int
    project_id: int | None
    sequence: int
    actor: str
    action: str
    object_type: str
    object_id: str
    reason: str
    data: Any
    created_at: datetime
    previous_hash: str
    entry_hash: str = ""


def chain(length: int, project_id: int | None = 7) -> list[Entry]:
    entries: list[Entry] = []
    previous = GENESIS
    for n in range(1, length + 1):
        entry = Entry(
            pk=100 + n,
            project_id=project_id,
            sequence=n,
            actor="user:riley",
            action="fact.withdrawn",
            object_type="fact",
            object_id=str(n),
            reason=f"Reason {n}",
            data={"fact": n},
            created_at=START + timedelta(minutes=n),
            previous_hash=previous,
        )
        entry = replace(entry, entry_hash=entry_digest(entry))
        entries.append(entry)
        previous = entry.entry_hash
    return entries


def test_the_hash_covers_the_content_and_the_link_but_not_the_row_id() -> None:
    entry = chain(1)[0]
    assert entry_digest(replace(entry, pk=999)) == entry.entry_hash
    for changed in (
        replace(entry, reason="Another reason"),
        replace(entry, data={"fact": 2}),
        replace(entry, created_at=entry.created_at + timedelta(microseconds=1)),
        replace(entry, previous_hash="f" * 64),
        replace(entry, project_id=8),
    ):
        assert entry_digest(changed) != entry.entry_hash


def test_an_intact_chain_has_no_broken_link() -> None:
    assert first_broken_link(7, chain(5)) is None
    assert first_broken_link(7, []) is None


def test_an_edited_entry_is_the_broken_link() -> None:
    entries = chain(4)
    entries[2] = replace(entries[2], reason="Edited afterwards")
    assert first_broken_link(7, entries) == BrokenLink(7, 3, 103, "content does not match its hash")


def test_an_edited_and_rehashed_entry_breaks_the_link_after_it() -> None:
    entries = chain(4)
    edited = replace(entries[1], reason="Edited afterwards")
    entries[1] = replace(edited, entry_hash=entry_digest(edited))
    assert first_broken_link(7, entries) == BrokenLink(7, 3, 103, "does not link to the entry before it")


def test_a_missing_entry_is_named_where_the_gap_is() -> None:
    entries = chain(4)
    del entries[1]
    assert first_broken_link(7, entries) == BrokenLink(7, 3, 103, "expected entry #2: a row is missing")
