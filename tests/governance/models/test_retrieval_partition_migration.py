"""Migration 0034 turns the retrieval log into a table partitioned by month (issue 13)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from governance.models import Fact, RetrievalEvent, RetrievalFeedback
from governance.services import checkpoints
from tests.personas import FactFactory, make_retrieval_event

BEFORE = [("governance", "0033_review_keep_both")]
# Indexes a composite index made redundant (migration 0042_cheaper_retrieval_writes).
DROPPED_LATER = {
    "governance_retrievalevent_agent_id_5ef43dba",
    "governance_retrievalevent_principal_id_6ef70dad",
    "governance_retrievalevent_project_id_e6844d79",
}


def _migrate(targets: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def _scalar(sql: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        row = cursor.fetchone()
        return row[0] if row else None


def _partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'governance_retrievalevent'::regclass ORDER BY 1"
        )
        return [row[0] for row in cursor.fetchall()]


def _shape() -> dict[str, Any]:
    """What the table carries besides its rows, as the catalogue says."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'governance_retrievalevent'::regclass ORDER BY 1"
        )
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'governance_retrievalevent'::regclass "
            "AND contype IN ('c', 'f') ORDER BY 1"
        )
        constraints = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'governance_retrievalevent'::regclass "
            "AND NOT tgisinternal ORDER BY 1"
        )
        triggers = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT policyname, qual, with_check FROM pg_policies "
            "WHERE tablename = 'governance_retrievalevent'"
        )
        policies = cursor.fetchall()
        cursor.execute(
            "SELECT relrowsecurity, relacl::text[] FROM pg_class "
            "WHERE oid = 'governance_retrievalevent'::regclass"
        )
        row_security, acl = cursor.fetchone()
    return {
        "indexes": indexes,
        "constraints": constraints,
        "triggers": triggers,
        "policies": policies,
        "row_security": row_security,
        "acl": sorted(acl),
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_existing_events_move_into_monthly_partitions_and_keep_what_points_at_them(
    support_bot: Any,
) -> None:
    # Made with today's columns (the model's), before the fact table loses the later ones.
    derived = FactFactory.create(project=support_bot.agent.project)
    _migrate(BEFORE)
    assert _scalar("SELECT relkind FROM pg_class WHERE oid = 'governance_retrievalevent'::regclass") == "r"
    before = _shape()
    # Events of two past months and of now, stored in the unpartitioned table.
    old = make_retrieval_event(
        support_bot.agent, query="march", context="- a", created_at=datetime(2026, 3, 14, 9, tzinfo=UTC)
    )
    april = make_retrieval_event(
        support_bot.agent, query="april", context="- b", created_at=datetime(2026, 4, 30, 23, 59, tzinfo=UTC)
    )
    recent = make_retrieval_event(support_bot.agent, query="now", context="- c")
    RetrievalFeedback.objects.create(event=old, used=["F-1"])
    Fact.objects.filter(pk=derived.pk).update(derived_from_retrieval=april)

    _migrate()

    assert _scalar("SELECT relkind FROM pg_class WHERE oid = 'governance_retrievalevent'::regclass") == "p"
    now = datetime.now(UTC)
    months = {f"governance_retrievalevent_p{m}" for m in ("202603", "202604", now.strftime("%Y%m"))}
    assert months <= set(_partitions())
    assert "governance_retrievalevent_default" in _partitions()
    assert _scalar("SELECT count(*) FROM governance_retrievalevent_p202603") == 1
    assert _scalar("SELECT count(*) FROM governance_retrievalevent_p202604") == 1
    after = _shape()
    # Every index came through, less those migration 0042 dropped later on.
    assert after["indexes"] == sorted(set(before["indexes"]) - DROPPED_LATER)
    assert after["constraints"] == before["constraints"]
    assert after["triggers"] == before["triggers"]
    assert after["policies"] == before["policies"] and after["row_security"]
    assert after["acl"] == before["acl"]
    assert _scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'governance_retrievalevent'::regclass AND contype = 'p'"
    ) == ("PRIMARY KEY (id, created_at)")

    # Rows, ids, seals and what points at them came through.
    moved = {e.pk: e for e in RetrievalEvent.objects.all()}
    assert set(moved) == {old.pk, april.pk, recent.pk}
    assert moved[april.pk].query == "april" and moved[april.pk].created_at == april.created_at
    assert checkpoints.verify_retrieval_seals() is None
    assert RetrievalFeedback.objects.get(event_id=old.pk).used == ["F-1"]
    assert Fact.objects.get(pk=derived.pk).derived_from_retrieval_id == april.pk
    # Ids go on where they were.
    assert make_retrieval_event(support_bot.agent, query="next", context="- d").pk > recent.pk
    # Still append-only, partition by partition.
    with pytest.raises(Exception, match="Cannot delete"), transaction.atomic():
        RetrievalEvent.objects.filter(pk=old.pk).delete()
    # A reference to an event that does not exist is refused, as the foreign key did.
    with pytest.raises(IntegrityError, match="does not exist"), transaction.atomic():
        FactFactory.create(project=support_bot.agent.project, derived_from_retrieval_id=10**12)

    # And back: one plain table with every row, the foreign keys again.
    _migrate(BEFORE)
    assert _scalar("SELECT relkind FROM pg_class WHERE oid = 'governance_retrievalevent'::regclass") == "r"
    assert _shape() == before
    assert _scalar("SELECT count(*) FROM governance_retrievalevent") == 4
    assert (
        _scalar("SELECT count(*) FROM pg_constraint WHERE confrelid = 'governance_retrievalevent'::regclass")
        == 3
    )
    _migrate()
