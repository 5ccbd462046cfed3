"""The one keyset cursor of every paged listing (history, retrieval log, review queue).

A cursor is the sort key of the last row a page showed, written
``<microseconds since epoch>_<n>_<n>...``: exact (PostgreSQL keeps
microseconds), URL-safe, and opaque to clients. Whatever this module did not
make raises ``InvalidCursor``; the API answers its message as is, the console
says it in the page's own words.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A bigint column's largest value: a larger id would fail in the query, not here.
_LARGEST = 2**63 - 1


class InvalidCursor(ValueError):
    """A cursor this service did not make: stale, hand-edited or forged."""

    def __init__(self) -> None:
        super().__init__("Not a cursor from this listing; start again from the first page.")


def encode_cursor(moment: datetime, *numbers: int) -> str:
    return "_".join(str(part) for part in ((moment - _EPOCH) // timedelta(microseconds=1), *numbers))


def decode_cursor(value: str, count: int) -> tuple[datetime, tuple[int, ...]]:
    """The moment and the ``count`` numbers ``encode_cursor`` wrote into ``value``."""
    parts = value.split("_")
    # isascii: str.isdigit also accepts digits such as "²" that int() refuses.
    if len(parts) != count + 1 or not all(p.isascii() and p.isdigit() and len(p) <= 19 for p in parts):
        raise InvalidCursor
    micros, *numbers = (int(p) for p in parts)
    if micros > _LARGEST or any(n > _LARGEST for n in numbers):
        raise InvalidCursor
    try:
        return _EPOCH + timedelta(microseconds=micros), tuple(numbers)
    except OverflowError as exc:
        raise InvalidCursor from exc
