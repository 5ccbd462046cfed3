"""Migration 0041 drops three redundant indexes of facts and writes, and takes them back on the way down."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.governance.database_helpers import plan_without_seqscan

BEFORE = [("governance", "0040_write_held_index")]
AFTER = [("governance", "0041_fewer_redundant_indexes")]


def indexes(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_the_redundant_indexes_go_and_come_back() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    before = {**indexes("governance_fact"), **indexes("governance_write")}
    assert "governance_fact_fingerprint_76b423cf_like" in before
    assert "governance_fact_project_id_7a77d335" in before
    assert "governance_write_agent_id_f5f760e0" in before

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    after = {**indexes("governance_fact"), **indexes("governance_write")}
    assert set(before) - set(after) == {
        "governance_fact_fingerprint_76b423cf",
        "governance_fact_fingerprint_76b423cf_like",
        "governance_fact_project_id_7a77d335",
        "governance_write_fingerprint_b22aae31",
        "governance_write_fingerprint_b22aae31_like",
        "governance_write_agent_id_f5f760e0",
    }
    assert set(after) - set(before) == {"fact_fingerprint_idx", "write_fingerprint_idx"}
    assert after["fact_fingerprint_idx"].endswith("USING btree (fingerprint)")
    # The look-ups the dropped indexes served still find an index.
    assert "Index" in plan_without_seqscan("SELECT 1 FROM governance_fact WHERE fingerprint = %s", ["x"])
    assert "Index" in plan_without_seqscan("SELECT 1 FROM governance_fact WHERE project_id = %s", [1])
    assert "Index" in plan_without_seqscan("SELECT 1 FROM governance_write WHERE agent_id = %s", [1])

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert {**indexes("governance_fact"), **indexes("governance_write")} == before

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
