"""Migration 0042 drops six indexes a retrieval wrote for nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.governance.database_helpers import plan_without_seqscan

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


def indexes() -> dict[str, str]:
    """Every index of the three tables and of the events' partitions, by name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) "
            "OR tablename LIKE 'governance\\_retrievalevent\\_%%'",
            [list(TABLES)],
        )
        return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_the_indexes_go_and_the_lookups_they_served_keep_an_index() -> None:
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
        assert "Index" in plan_without_seqscan(sql, [1]), sql

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert indexes() == before

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
