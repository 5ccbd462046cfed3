"""Migration 0042 drops six indexes a retrieval wrote for nothing, and compresses with lz4 where it can."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from psycopg import errors

BEFORE = [("governance", "0041_fewer_redundant_indexes")]
AFTER = [("governance", "0042_cheaper_retrieval_writes")]
TABLES = ("governance_retrievalevent", "governance_session", "governance_sessionblock")
DROPPED = {
    "governance_retrievalevent_agent_id_5ef43dba",
    "governance_retrievalevent_principal_id_6ef70dad",
    "governance_retrievalevent_project_id_e6844d79",
    "governance_session_agent_id_13e184c3",
    "governance_session_principal_id_9546349d",
    "governance_sessionblock_session_id_2b76d071",
}
COMPRESSED = {
    ("governance_retrievalevent", "candidate_data"),
    ("governance_retrievalevent", "context"),
    ("governance_sessionblock", "text"),
    ("governance_sessionblock", "items"),
}


def indexes() -> dict[str, str]:
    """Every index of the three tables and of the events' partitions, by name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) "
            "OR tablename LIKE 'governance\\_retrievalevent\\_%%'",
            [list(TABLES)],
        )
        return dict(cursor.fetchall())


def compression() -> dict[tuple[str, str], str]:
    """The compression method set on each of COMPRESSED's columns, of each table and partition."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attname, a.attcompression FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE c.relname LIKE 'governance\\_retrievalevent%%' OR c.relname = 'governance_sessionblock'"
        )
        root = {table for table, _ in COMPRESSED}
        return {
            (relname, column): method
            for relname, column, method in cursor.fetchall()
            for table in root
            if relname.startswith(table) and (table, column) in COMPRESSED
        }


def server_has_lz4() -> bool:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE lz4_probe (value text COMPRESSION lz4)")
            transaction.set_rollback(True)
    except Exception as error:  # Django wraps psycopg's error; its cause says what it was
        assert isinstance(error.__cause__, errors.FeatureNotSupported), error
        return False
    return True


def plan(sql: str) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, [1])
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_the_indexes_go_the_lookups_keep_an_index_and_compression_follows_the_server() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    before = indexes()
    assert set(before) >= DROPPED
    # Each event partition has its own copy of the event indexes.
    partition_copies = {
        name
        for name, definition in before.items()
        if "_p20" in name and definition.endswith("USING btree (agent_id)")
    }
    assert partition_copies
    assert set(compression().values()) == {""}

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    after = indexes()
    gone = set(before) - set(after)
    assert gone >= DROPPED
    assert gone >= partition_copies
    assert set(after) - set(before) == set()
    # The look-ups (and foreign key checks) the dropped indexes served still use an index.
    for sql in (
        "SELECT 1 FROM governance_retrievalevent WHERE agent_id = %s",
        "SELECT 1 FROM governance_retrievalevent WHERE principal_id = %s",
        "SELECT 1 FROM governance_retrievalevent WHERE project_id = %s",
        "SELECT 1 FROM governance_session WHERE agent_id = %s",
        "SELECT 1 FROM governance_session WHERE principal_id = %s",
        "SELECT 1 FROM governance_sessionblock WHERE session_id = %s",
    ):
        assert "Index" in plan(sql), sql
    # lz4 on every partition and on the tables where the server has it; pglz (the default) elsewhere.
    methods = compression()
    assert {table for table, _ in methods} >= {
        "governance_retrievalevent",
        "governance_retrievalevent_default",
        "governance_sessionblock",
    }
    assert set(methods.values()) == ({"l"} if server_has_lz4() else {""})

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert indexes() == before
    assert set(compression().values()) == {""}

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
