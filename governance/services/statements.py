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

from collections.abc import Sequence
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import connection, models
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery

from governance import prepared

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
    key = (type(row), connection.alias, tuple(fields), tuple(unique_fields), tuple(update_fields))
    sql = _compiled.get(key)
    if sql is not None and _fixed_text(fields, row):
        # The compiler's values, made as it makes them (``pre_save``, then
        # ``get_db_prep_save``); the text it would make is the one it made.
        return sql, [f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields]
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
    [(sql, compiled_values)] = query.get_compiler(using=connection.alias).as_sql()
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
