"""A connection as the database's owner role, for tests that act as a database administrator.

The application's own connection (the test's) is the application role, which
may not disable triggers or change history; an attacker with the owner's
credentials can. The owner's connection is a second connection, so it sees
only committed rows: tests that use it run with ``transaction=True``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection


def connection_params(role: str) -> dict[str, Any]:
    connection.ensure_connection()
    return {
        "host": connection.settings_dict["HOST"],
        "dbname": connection.settings_dict["NAME"],
        "user": role,
    }


def owner_role() -> str:
    assert settings.DATABASE_OWNER, "the embedded test database has an owner role"
    return str(settings.DATABASE_OWNER["USER"])


@contextmanager
def owner_cursor() -> Iterator[psycopg.Cursor[Any]]:
    with psycopg.connect(**connection_params(owner_role()), autocommit=True) as conn:
        yield conn.cursor()


def tamper(sql: str, params: list[Any], table: str = "governance_auditentry") -> None:
    """Edit an append-only table as an attacker holding the owner's credentials would: triggers off."""
    with owner_cursor() as cursor, cursor.connection.transaction():
        # Django's foreign keys are deferred; ALTER TABLE refuses while checks are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        cursor.execute(sql, params)
        cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def end_session(backend_pid: int) -> None:
    """End one database session as a restart or an administrator does (``pg_terminate_backend``).

    From a connection of the application role, which may end its own role's
    sessions; returns once the session is gone, so the next statement on it
    certainly fails.
    """
    with psycopg.connect(**connection_params(str(connection.settings_dict["USER"])), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s, 5000)", [backend_pid])


def plan_without_seqscan(sql: str, params: list[str | int], *, without_sort: bool = False) -> str:
    """EXPLAIN of ``sql`` with sequential scans discouraged: whether an index can serve it at all.

    ``without_sort`` discourages sorts too: whether an index can give the rows in
    the order asked (the plan still sorts where none can). Without it, which plan
    wins over a nearly empty table depends on the statistics earlier tests left.
    """
    from django.db import transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        if without_sort:
            cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())
