"""Migration 0045 drops 28 indexes writes kept for nothing; two reference checks wait for a value."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from governance.models import Fact
from tests.governance.database_helpers import plan_without_seqscan
from tests.personas import FactFactory

BEFORE = [("governance", "0044_write_lookup_indexes")]
AFTER = [("governance", "0045_cheaper_write_inserts")]
HISTORY = (
    "governance_agentevent",
    "governance_agentkeyevent",
    "governance_factevent",
    "governance_personalaccesstokenevent",
    "governance_policydraftevent",
    "governance_reviewdecisionevent",
    "governance_supersessionevent",
    "governance_writeevent",
)
TABLES = (*HISTORY, "governance_auditentry", "governance_principal")


def indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s)", [list(TABLES)])
        return dict(cursor.fetchall())


def reference_checks() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgname IN ('governance_write_retrieval_exists', 'governance_fact_retrieval_exists')"
        )
        return dict(cursor.fetchall())


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_history_keeps_only_its_object_index_and_a_missing_retrieval_is_still_refused(
    support_bot: Any,
) -> None:
    # Made with today's columns (the model's), before later migrations' columns are taken away.
    fact = FactFactory.create(project=support_bot.agent.project)
    _migrate(BEFORE)
    before, checks = indexes(), reference_checks()
    assert len(checks) == 2 and not any("WHEN" in definition for definition in checks.values())

    _migrate(AFTER)
    after = indexes()
    assert set(after) - set(before) == set()
    gone = set(before) - set(after)
    assert len(gone) == 28, sorted(gone)
    # What is left of history: its own key and the row each event records.
    for table in HISTORY:
        kept = sorted(
            definition.split(" USING ")[1]
            for definition in after.values()
            if f".{table} USING " in definition
        )
        assert kept == ["btree (pgh_id)", "btree (pgh_obj_id)"], (table, kept)
    # The look-ups (and foreign key checks) of the dropped live indexes still use an index.
    for sql in (
        "SELECT 1 FROM governance_auditentry WHERE project_id = %s",
        "SELECT 1 FROM governance_principal WHERE project_id = %s",
        "SELECT 1 FROM governance_writeevent WHERE pgh_obj_id = %s",
        "SELECT 1 FROM governance_factevent WHERE pgh_obj_id = %s",
    ):
        assert "Index" in plan_without_seqscan(sql, [1]), sql
    assert all("WHEN ((new.derived_from_retrieval_id IS NOT NULL))" in d for d in reference_checks().values())
    # A reference to a retrieval that does not exist is refused at commit, as before.
    with pytest.raises(IntegrityError, match="does not exist"), transaction.atomic():
        Fact.objects.filter(pk=fact.pk).update(derived_from_retrieval_id=10**12)

    _migrate(BEFORE)
    assert indexes() == before
    assert reference_checks() == checks

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
