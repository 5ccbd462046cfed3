"""Several row changes in one statement; each INSERT's text compiled once (services/statements.py)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.db.models import Value
from django.db.models.functions import Upper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.models import AuditEntry, Fact, Principal, SessionBlock, Write
from governance.services import session_blocks, statements

EMBEDDING_DIMENSIONS = django_settings.EMBEDDING_DIMENSIONS


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


# --- rows sent as one JSON document (statements.insert_rows) -------------------------

# Text PostgreSQL stores: anything but NUL (which no text column holds) and lone surrogates
# (which no UTF-8 connection sends).
_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=60)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_WHEN = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(2090, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]),
)
# A vector's values from a seed (drawing 384 floats one by one made each example slow).
_VECTOR = st.builds(
    lambda seed: [random.Random(seed).uniform(-1, 1) for _ in range(EMBEDDING_DIMENSIONS)], st.integers()
)


def _fresh_ids(table: str, count: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, count]
        )
        return [row[0] for row in cursor.fetchall()]


def _stored(model: type[Any], pk: int, *leave_out: str) -> dict[str, Any]:
    row = model.objects.filter(pk=pk).values().get()
    return {k: v for k, v in row.items() if k not in ("id", *leave_out)}


@pytest.mark.django_db
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    statement=_TEXT,
    ref=_TEXT,
    key=st.none() | _TEXT,
    claims=_JSON,
    findings=st.lists(st.dictionaries(_TEXT, _TEXT, max_size=3), max_size=3),
    observed=_WHEN,
    valid_to=st.none() | _WHEN,
    vector=st.none() | _VECTOR,
    signature=st.integers(-(2**63), 2**63 - 1),
    pending=st.booleans(),
)
def test_rows_sent_as_json_are_the_rows_save_stores(
    support_bot: Any,
    statement: str,
    ref: str,
    key: str | None,
    claims: Any,
    findings: list[dict[str, str]],
    observed: datetime,
    valid_to: datetime | None,
    vector: list[float] | None,
    signature: int,
    pending: bool,
) -> None:
    agent = support_bot.agent
    principal = Principal.objects.create(project=agent.project, external_id=f"p-{uuid.uuid4().hex}")

    def rows(fact_id: int, write_id: int) -> list[Any]:
        fact = Fact(
            pk=fact_id,
            project=agent.project,
            principal=principal,
            kind="preference",
            key=key,
            statement=statement,
            source_type="user_statement",
            source_ref=ref,
            source_observed_at=observed,
            writer=f"agent:{agent.slug}",
            agent=agent,
            authority=4,
            valid_to=valid_to,
            recorded_at=observed,
            last_verified_at=observed,
            status_changed_at=observed,
            status="pending_review",
            token_count=len(statement),
            statement_digest="d" * 64,
            fingerprint="f" * 64,
            embedding=vector,
            meaning_check_pending=pending,
            lexical_signature=signature,
            claims=claims,
        )
        write = Write(
            pk=write_id,
            project=agent.project,
            agent=agent,
            principal=principal,
            kind="preference",
            key=key,
            statement=statement,
            fingerprint="f" * 64,
            request_digest="r" * 64,
            source_type="user_statement",
            source_ref=ref,
            source_observed_at=observed,
            authority=4,
            findings=findings,
            outcome="pending_review",
            status="pending_review",
            fact=fact,
            response={"statement": statement, "claims": claims},
            created_at=observed,
        )
        entry = AuditEntry(
            project=agent.project,
            actor=ref[:200],
            action="write.submitted",
            object_type="write",
            object_id=str(write_id),
            reason=statement,
            data={"findings": findings, "claims": claims},
            created_at=observed,
        )
        return [fact, write, entry]

    (fact_a, fact_b), (write_a, write_b) = _fresh_ids("governance_fact", 2), _fresh_ids("governance_write", 2)
    with transaction.atomic():
        for row in rows(fact_a, write_a):
            row.save(force_insert=True)
    by_json = rows(fact_b, write_b)
    with transaction.atomic():
        statements.together([part for row in by_json for part in statements.insert_rows([row])])
    assert _stored(Fact, fact_b) == _stored(Fact, fact_a)
    assert _stored(Write, write_b, "fact_id") == _stored(Write, write_a, "fact_id")
    entries = AuditEntry.objects.filter(object_type="write", object_id__in=[str(write_a), str(write_b)])
    first, second = (
        {k: v for k, v in e.items() if k not in ("id", "object_id")} for e in entries.order_by("id").values()
    )
    assert first == second


@pytest.mark.django_db
def test_a_value_not_of_its_columns_type_is_stored_as_save_stores_it(support_bot: Any) -> None:
    # save() stores str(False) in a text column and int(True) in an integer one;
    # JSON false and true would have been stored as 'false' and refused.
    agent = support_bot.agent
    principal = Principal.objects.create(project=agent.project, external_id="p-types")
    when = datetime(2026, 1, 2, tzinfo=UTC)

    def fact(pk: int) -> Fact:
        return Fact(
            pk=pk,
            project=agent.project,
            principal=principal,
            kind="preference",
            statement=7,
            source_type="user_statement",
            source_observed_at=when,
            writer=f"agent:{agent.slug}",
            agent=agent,
            authority=4,
            recorded_at=when,
            last_verified_at=when,
            status_changed_at=when,
            status="active",
            token_count=True,
            statement_digest="d" * 64,
            fingerprint="f" * 64,
            meaning_check_pending=0,
            claims=False,
        )

    saved, sent = _fresh_ids("governance_fact", 2)
    fact(saved).save(force_insert=True)
    statements.together(statements.insert_rows([fact(sent)]))
    stored = _stored(Fact, sent)
    assert stored == _stored(Fact, saved)
    assert (stored["claims"], stored["statement"], stored["token_count"]) == ("False", "7", 1)


def test_a_value_only_the_compiler_can_send_goes_as_its_own_insert() -> None:
    [(sql, values)] = statements.insert_rows([_block(text=Upper(Value("shout")))])
    assert "UPPER(" in sql and "shout" in values
    [(sql, values)] = statements.insert_rows([_block()])
    assert "json_populate_recordset" in sql and len(values) == 1
