"""Several row changes in one statement: one round trip where each would send its own.

A write stores its fact, itself and its audit entry together; a retrieval
stores its event with the session's start block and the principal's last-seen
time. Each INSERT is the one Django issues for ``save(force_insert=True)`` (or
``bulk_create(update_conflicts=True)``): the same columns, defaults and value
conversions. All but the last become data-modifying WITH clauses, which
PostgreSQL runs with their triggers; foreign keys between them are checked at
commit, as ever.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery
from psycopg.types.json import Jsonb

from governance import prepared
from governance.models.facts import EmbeddingField, vector_text

Statement = tuple[str, Sequence[Any]]


def insert(
    row: models.Model, *, unique_fields: Sequence[str] = (), update_fields: Sequence[str] = ()
) -> Statement:
    """The INSERT of ``row``; with ``unique_fields``, an upsert updating ``update_fields`` on conflict."""
    meta = row._meta
    fields = [
        f
        for f in meta.local_concrete_fields
        if not f.generated and (row.pk is not None or f is not meta.auto_field)
    ]
    # The connection itself, not the thread-local proxy ``connection``: each field's
    # conversion reads it several times, ~2.6 µs a read through the proxy (a retrieval
    # event's insert, every round, took 83 µs of CPU with the proxy and takes 50).
    db = connections[DEFAULT_DB_ALIAS]
    key = (type(row), db.alias, tuple(fields), tuple(unique_fields), tuple(update_fields))
    sql = _compiled.get(key)
    if sql is not None and _fixed_text(fields, row):
        # The compiler's values, made as it makes them (``pre_save``, then
        # ``get_db_prep_save``); the text it would make is the one it made.
        return sql, [f.get_db_prep_save(f.pre_save(row, True), db) for f in fields]
    if unique_fields:
        query = InsertQuery(
            type(row),
            on_conflict=OnConflict.UPDATE,
            update_fields=[meta.get_field(name) for name in update_fields],
            unique_fields=[meta.get_field(name) for name in unique_fields],
        )
    else:
        query = InsertQuery(type(row))
    query.insert_values(fields, [row])
    [(sql, compiled_values)] = query.get_compiler(using=db.alias).as_sql()
    if _fixed_text(fields, row):
        _compiled[key] = sql
    return sql, list(compiled_values)


# The text of each INSERT ``insert`` compiled, by model, fields and conflict
# handling: compiling it again on every retrieval and write (Django's compiler
# walks every field) cost more than the values. Bounded by the code's models.
_compiled: dict[tuple[Any, ...], str] = {}


def _fixed_text(fields: Sequence[models.Field[Any, Any]], row: models.Model) -> bool:
    """Whether the compiled text holds for this row's values: none is an expression
    (compiled into the text), and every placeholder is a plain one or an array's
    cast (``ArrayField.get_placeholder`` names only the column's type)."""
    for field in fields:
        if hasattr(getattr(row, field.attname, None), "resolve_expression"):
            return False
        placeholder = getattr(field, "get_placeholder", None)
        if placeholder is not None and not isinstance(field, ArrayField):
            return False
    return True


def insert_rows(rows: Sequence[models.Model]) -> list[Statement]:
    """One INSERT of new rows of one model, their values sent as one JSON document.

    ``INSERT ... SELECT ... FROM json_populate_recordset(NULL::table, %s)``: the
    server reads each value with its column's own input function, as it reads
    the text psycopg would have quoted for it, so the stored rows are those
    ``save(force_insert=True)`` stores (pinned by tests/governance/services/
    test_statements.py). One parameter instead of one per column: a write's
    fact, write and audit entry were ~80 values, past psycopg's cache of parsed
    statements (50 values), so it split and quoted them again on every write,
    and the server parsed that many literals (issue 13). A row whose value is
    an expression, or of a type this does not know, is sent as ``insert`` sends
    it, one INSERT a row.
    """
    first = rows[0]
    plan = _json_plan(type(first), with_pk=first.pk is not None)
    try:
        document = "[" + ",".join([_json_row(plan, row) for row in rows]) + "]"
    except _NotPlain:
        return [insert(row) for row in rows]
    return [(plan.sql, [document])]


class _NotPlain(Exception):
    """A value that only Django's compiler knows how to send."""


@dataclass(frozen=True)
class _JsonPlan:
    sql: str
    # Per column: the JSON key with its quotes and colon, how its value is encoded, the field.
    columns: tuple[tuple[str, str, models.Field[Any, Any]], ...]


@functools.cache
def _json_plan(model: type[models.Model], *, with_pk: bool) -> _JsonPlan:
    meta = model._meta
    fields = [
        f for f in meta.local_concrete_fields if not f.generated and (with_pk or f is not meta.auto_field)
    ]
    table = connection.ops.quote_name(meta.db_table)
    # Concrete fields always have a column (the stubs allow None).
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)  # type: ignore[arg-type]
    sql = (
        f"INSERT INTO {table} ({names}) SELECT {names} FROM json_populate_recordset(NULL::{table}, %s::json)"
    )
    return _JsonPlan(sql, tuple((json.dumps(f.column) + ":", _encoding(f), f) for f in fields))


def _encoding(field: models.Field[Any, Any]) -> str:
    """How ``_json_value`` sends a field's values (``generic`` asks the field, as ``save()`` does)."""
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return "generic"  # pre_save sets the value
    kind = field.get_internal_type()
    if isinstance(field, models.ForeignKey):
        kind = field.target_field.get_internal_type()
    if kind in _INTEGER_KINDS:
        return "integer"
    if kind in ("CharField", "TextField"):
        return "text"
    if kind == "BooleanField":
        return "boolean"
    if kind == "DateTimeField":
        return "datetime"
    if type(field) is models.JSONField and field.encoder is None:
        return "json"
    if type(field) is EmbeddingField:
        return "vector"
    return "generic"


_INTEGER_KINDS = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "SmallAutoField",
        "BigIntegerField",
        "IntegerField",
        "SmallIntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
    }
)
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def _json_row(plan: _JsonPlan, row: models.Model) -> str:
    values = row.__dict__
    return (
        "{"
        + ",".join(
            [key + _json_value(how, field, values[field.attname], row) for key, how, field in plan.columns]
        )
        + "}"
    )


def _json_value(how: str, field: models.Field[Any, Any], value: Any, row: models.Model) -> str:
    if value is None:
        return "null"
    # Only a value of the column's own type takes the short way: save() would
    # store str(False) in a text column, and 1 in an integer column for True.
    kind = type(value)
    if how == "text":
        if kind is str:
            return _dumps(value)
    elif how == "integer":
        if kind is int:
            return str(value)
    elif how == "boolean":
        if kind is bool:
            return "true" if value else "false"
    elif how == "datetime":
        if kind is datetime and value.tzinfo is not None:
            return f'"{value.isoformat()}"'
    elif how == "json" and not hasattr(value, "resolve_expression"):
        return _dumps(value)
    elif how == "vector" and kind in (list, tuple):
        return '"' + vector_text(value) + '"'
    if hasattr(value, "resolve_expression"):
        raise _NotPlain
    # Anything else as save() prepares it; the JSON then holds the text the column reads.
    prepared = field.get_db_prep_save(field.pre_save(row, True), connection)
    if prepared is None:
        return "null"
    if isinstance(prepared, Jsonb):
        # Its own encoding (a field's encoder, or JSON already made): the text goes in as it is.
        text = (prepared.dumps or _dumps)(prepared.obj)
        return text.decode() if isinstance(text, bytes) else text
    if isinstance(prepared, datetime | date):
        return '"' + prepared.isoformat() + '"'
    if isinstance(prepared, str | int | float | bool | list):
        return _dumps(prepared)
    raise _NotPlain


def together(statements: Sequence[Statement], *, returning: str | None = None) -> Any:
    """Run ``statements`` as one: the last is the main statement, the others its WITH clauses.

    With ``returning`` (a column of the last statement's table) the value it
    returns; otherwise nothing. The statement is prepared on the connection
    where it may be (``governance.prepared``): its text is the same for every
    row of the same models, and a write's (three tables, ~80 values) took the
    server longer to parse and plan, and psycopg longer to split (past its
    cache's 4 kB and 50 values), than the few values it binds.
    """
    *first, (last, last_params) = statements
    params: list[Any] = []
    for _, values in first:
        params.extend(values)
    params.extend(last_params)
    if first:
        last = (
            "WITH " + ", ".join(f"together_{n} AS ({sql})" for n, (sql, _) in enumerate(first)) + " " + last
        )
    if returning is not None:
        last += f" RETURNING {connection.ops.quote_name(returning)}"
    with connection.cursor() as cursor:
        prepared.execute(cursor, last, params)
        return cursor.fetchone()[0] if returning is not None else None


def stored(*rows: models.Model) -> None:
    """Mark rows inserted by ``together`` as saved, as ``save()`` would."""
    for row in rows:
        row._state.adding = False
        row._state.db = connection.alias
