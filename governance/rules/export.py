"""CSV and JSON Lines rendering of export rows: pure functions over plain dicts.

Exported text (reasons, actor labels, principal ids) comes partly from
agents, so CSV cells that a spreadsheet would run as a formula are defused.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

FORMATS = ("csv", "jsonl")
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl; charset=utf-8"}
# Characters that make Excel, LibreOffice or Sheets evaluate a cell (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Lines are sent in chunks of about this many bytes: fewer, larger writes to the socket.
CHUNK_BYTES = 64 * 1024


def safe_cell(value: Any) -> Any:
    """A CSV cell that is data in every spreadsheet: formula-like text gets a leading quote."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_lines(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The header, then the rows, yielded as text blocks of about ``CHUNK_BYTES``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([safe_cell(row.get(name)) for name in columns])
        # Draining the buffer per block, not per row, halves the cost of a large export.
        if buffer.tell() >= CHUNK_BYTES:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, sort_keys=True, separators=(",", ":"), default=str) + "\n"


def chunked(lines: Iterable[str], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Join small lines into chunks of roughly ``size`` bytes."""
    parts: list[str] = []
    length = 0
    for line in lines:
        parts.append(line)
        length += len(line)
        if length >= size:
            yield "".join(parts).encode()
            parts, length = [], 0
    if parts:
        yield "".join(parts).encode()
