"""Bounds on what a request to the API may carry (docs/operations.md, "Limits").

One place for them, so that malformed input is refused with a JSON 4xx at the
edge instead of reaching the database as a 500: an id beyond bigint, a
300-character or NUL-bearing path segment, a round number beyond integer, a
body of megabytes, JSON nested thousands deep.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from rest_framework import serializers

# Largest value of the bigint primary keys.
MAX_DB_ID = 2**63 - 1
# Retrieval rounds within one session; the column is a 32-bit integer and no
# conversation has a million turns.
MAX_ROUND = 1_000_000
# Policy version numbers (a 32-bit column).
MAX_POLICY_VERSION = 2**31 - 1
# Principal and session external ids (the columns hold 200 characters).
MAX_EXTERNAL_ID_CHARS = 200
# JSON nesting: the API's bodies are at most three levels deep; beyond this a
# body is refused before anything walks it recursively.
MAX_JSON_DEPTH = 32


def db_id(**kwargs: Any) -> serializers.IntegerField:
    """An integer field for a row id: positive and within bigint."""
    return serializers.IntegerField(min_value=1, max_value=MAX_DB_ID, **kwargs)


def is_safe_path_text(value: str) -> bool:
    """No control characters (NUL cannot even be stored in PostgreSQL text).

    Only controls: an external id may hold any other character a body may
    (an agent can name a principal "Zoë" or use a non-breaking space).
    """
    return not any(unicodedata.category(ch) == "Cc" for ch in value)


class ExternalIdConverter:
    """``<extid:...>``: an external id in a path, 1-200 characters, none a control.

    A segment that does not fit answers 404 (JSON for the API): no principal
    or session can have such an id, so nothing by that name exists.
    """

    regex = "[^/]{1,%d}" % MAX_EXTERNAL_ID_CHARS  # noqa: UP031 (a regex, clearer with %)

    def to_python(self, value: str) -> str:
        if not is_safe_path_text(value):
            raise ValueError("control characters in a path segment")
        return value

    def to_url(self, value: str) -> str:
        return value


class DbIdConverter:
    """``<id:...>``: a row id in a path, within bigint (a larger one is 404, not 500)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= MAX_DB_ID:
            raise ValueError("not a row id")
        return number

    def to_url(self, value: int) -> str:
        return str(value)
