"""Migration 0048: a principal's facts newest status change first, as the principal's own index."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from governance.rules.policy import PolicySettings
from governance.rules.retrieval import standing_bounds
from governance.selectors.retrievals import INACTIVE_HISTORY_LIMIT, candidate_statement
from tests.governance.database_helpers import plan_without_seqscan

BEFORE = [("governance", "0047_fact_stored_claims")]
AFTER = [("governance", "0048_fact_principal_changed_index")]
ADDED = "fact_principal_changed_idx"
# A principal's facts, as the foreign key's checks and plain look-ups read them.
OF_THE_PRINCIPAL = "SELECT id FROM governance_fact WHERE principal_id = %s"


def indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'governance_fact'")
        return dict(cursor.fetchall())


def principal_only(found: dict[str, str]) -> set[str]:
    """Indexes on the principal's column alone (the foreign key's)."""
    return {name for name, definition in found.items() if definition.endswith("(principal_id)")}


def history_part() -> str:
    """A first round's history part (selectors.retrievals) with literal values, for EXPLAIN."""
    params = {
        **standing_bounds(PolicySettings(), timezone.now()),
        "project": 1,
        "principal": 1,
        "history_limit": INACTIVE_HISTORY_LIMIT,
    }
    with connection.cursor() as cursor:
        return cursor.mogrify(candidate_statement(("history",), "own", False), params)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_the_history_part_reads_newest_change_first_and_the_principal_keeps_one_index() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    before = indexes()
    assert ADDED not in before and len(principal_only(before)) == 1

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    after = indexes()
    # The foreign key's index made way for the new one: a fact's INSERT updates as many.
    assert set(after) - set(before) == {ADDED}
    assert set(before) - set(after) == principal_only(before)
    assert after[ADDED].endswith("(principal_id, status_changed_at DESC, id DESC)")
    # The history part (which names the principal alone) can stop at its limit, walking
    # the index in its order ...
    plan = plan_without_seqscan(history_part(), [], without_sort=True)
    assert ADDED in plan and "Sort" not in plan, plan
    # ... and a principal's facts are still found through an index (the new one, or on
    # PostgreSQL 18 any that has the principal second: which one an empty table's plan
    # takes says nothing).
    assert "Index" in plan_without_seqscan(OF_THE_PRINCIPAL, [1])

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert indexes() == before
    # migrating_as_owner migrates forward again.
