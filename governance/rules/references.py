"""Labelled identifiers people read and type: "F-240" is a fact, "W-241" a write.

Writes and facts are numbered by separate sequences, so "write #241 became
fact #240" while fact #241 is unrelated (issue 16 item 8). Every page shows
them with their letter, and the search box reads the same forms back, plus a
bare "#123" or "123" that may name anything with that number. Pure: no ORM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FACT_PREFIX = "F"
WRITE_PREFIX = "W"
# PostgreSQL integer ids: a bigger number is no reference (and would overflow the query).
MAX_ID = 2**63 - 1

RefKind = Literal["fact", "write", "any"]
_REFERENCE = re.compile(r"^\s*(?:(?P<letter>[fw])\s*-?\s*#?|#)?\s*(?P<number>[0-9]{1,19})\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Reference:
    kind: RefKind  # "any": a bare number, which may name a fact, a write, a session or a retrieval
    number: int


def fact_ref(pk: int | str) -> str:
    return f"{FACT_PREFIX}-{pk}"


def write_ref(pk: int | str) -> str:
    return f"{WRITE_PREFIX}-{pk}"


def parse_reference(text: str) -> Reference | None:
    """The id a search names: "F-12", "f12", "W-3", "w #3", "#12", "12"; None for anything else."""
    match = _REFERENCE.match(text)
    if match is None:
        return None
    number = int(match["number"])
    if not 0 < number <= MAX_ID:
        return None
    letter = (match["letter"] or "").upper()
    kind: RefKind = "fact" if letter == FACT_PREFIX else "write" if letter == WRITE_PREFIX else "any"
    return Reference(kind, number)
