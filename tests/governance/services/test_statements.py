"""Several row changes in one statement; each INSERT's text compiled once (services/statements.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db.models import Value
from django.db.models.functions import Upper

from governance.models import SessionBlock
from governance.services import session_blocks, statements


def _block(**overrides: Any) -> SessionBlock:
    values: dict[str, Any] = {
        "session_id": 7,
        "principal_id": 3,
        "identity_verified": True,
        "policy_version_id": 2,
        "mode": "resume",
        "text": "Remembered context",
        "tokens": 12,
        "fact_ids": [5, 6],
        "items": [{"fact_id": 5, "tier": "recent", "age_days": 1, "tokens": 9}],
        "hint_session_id": None,
        "created_at": datetime(2026, 1, 2, tzinfo=UTC),
    }
    return SessionBlock(**{**values, **overrides})


def _plain(values: Any) -> list[Any]:
    """Parameters as comparable values (a JSON value travels in psycopg's wrapper, named here)."""
    return [(type(v).__name__, v.obj) if hasattr(v, "obj") else v for v in values]


@pytest.mark.parametrize("upsert", [False, True])
def test_an_insert_whose_text_is_known_is_the_one_the_compiler_makes(upsert: bool) -> None:
    options: dict[str, Any] = (
        {"unique_fields": session_blocks.KEY_FIELDS, "update_fields": ("mode", "text", "fact_ids")}
        if upsert
        else {}
    )
    statements.insert(_block(), **options)
    changed = {"text": "Another text", "fact_ids": [9], "principal_id": None, "items": []}
    sql, values = statements.insert(_block(**changed), **options)
    statements._compiled.clear()
    fresh_sql, fresh_values = statements.insert(_block(**changed), **options)
    assert sql == fresh_sql
    assert _plain(values) == _plain(fresh_values)
    assert "Another text" in values and [9] in values and ("Jsonb", []) in _plain(values)


def test_an_expression_is_compiled_into_the_text_even_when_the_text_is_known() -> None:
    statements.insert(_block())
    sql, values = statements.insert(_block(text=Upper(Value("shout"))))
    assert "UPPER(" in sql and "shout" in values
    again, _ = statements.insert(_block())
    assert "UPPER(" not in again
