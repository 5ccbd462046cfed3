"""Migration 0044 gives a write's look-ups indexes that read their pools in the order they keep."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.governance.database_helpers import plan_without_seqscan

BEFORE = [("governance", "0043_fact_meaning_check_pending")]
AFTER = [("governance", "0044_write_lookup_indexes")]
ADDED = {"fact_active_kind_idx", "fact_active_observed_idx", "fact_principal_fingerprint_idx"}
ACTIVE = "project_id = %s AND principal_id = %s AND session_id IS NULL AND status = 'active'"
# The near-duplicate pool, the contradiction pool and the copies of a statement, as
# services.writes._what_the_write_meets reads them.
NEAR_DUPLICATES = f"SELECT id FROM governance_fact WHERE {ACTIVE} AND kind = %s ORDER BY id DESC LIMIT 200"
CONTRADICTIONS = (
    f"SELECT id FROM governance_fact WHERE {ACTIVE} AND kind NOT IN ('slot', 'summary')"
    " ORDER BY source_observed_at DESC, id DESC LIMIT 200"
)
COPIES = f"SELECT min(id) FILTER (WHERE kind = %s) FROM governance_fact WHERE {ACTIVE} AND fingerprint = %s"


def indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'governance_fact'")
        return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_the_pools_are_read_in_index_order_and_a_statements_copies_within_its_principal() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    before = indexes()
    assert "fact_fingerprint_idx" in before and not ADDED & set(before)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    after = indexes()
    assert set(after) - set(before) == ADDED
    assert set(before) - set(after) == {"fact_fingerprint_idx"}
    # Each pool can come from its index in the order it keeps, with no sort of the
    # principal's facts.
    pools: list[tuple[str, list[str | int], str]] = [
        (NEAR_DUPLICATES, [1, 1, "preference"], "fact_active_kind_idx"),
        (CONTRADICTIONS, [1, 1], "fact_active_observed_idx"),
    ]
    for sql, params, index in pools:
        plan = plan_without_seqscan(sql, params, without_sort=True)
        assert index in plan and "Sort" not in plan, plan
    # A statement's copies are found by principal and fingerprint together (which index
    # an empty table's plan takes says nothing).
    assert after["fact_principal_fingerprint_idx"].endswith("(project_id, principal_id, fingerprint)")
    assert "Index" in plan_without_seqscan(COPIES, ["preference", 1, 1, "x" * 64])

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert indexes() == before

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
