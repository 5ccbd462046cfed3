"""The retrieval log's monthly partitions: made ahead, and dropped past retention with an audit entry."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from governance import tasks
from governance.models import AuditEntry, Fact, RetrievalEvent, RetrievalFeedback, Write
from governance.services import checkpoints, retention
from memoryadmin.celery import app
from memoryadmin.embedded_db import APP_ROLE
from tests.governance.database_helpers import connection_params, tamper
from tests.personas import FactFactory, make_retrieval_event

# Months long past any retention, one per test that makes partitions: tests that
# commit (transaction=True) leave their partitions behind for the next.
OLD = datetime(2025, 1, 10, 12, tzinfo=UTC)


def verify() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("verify_audit", stdout=out, stderr=StringIO())
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


def partition_of(event: RetrievalEvent) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM governance_retrievalevent WHERE id = %s", [event.pk]
        )
        return str(cursor.fetchone()[0])


def partition_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"public.{name}"])
        return bool(cursor.fetchone()[0])


@pytest.mark.django_db
def test_upkeep_makes_this_month_and_the_next_ones_once() -> None:
    created = retention.ensure_partitions(datetime(2040, 11, 20, tzinfo=UTC), ahead=2)

    assert created == [
        "governance_retrievalevent_p204011",
        "governance_retrievalevent_p204012",
        "governance_retrievalevent_p204101",
    ]
    assert retention.ensure_partitions(datetime(2040, 11, 20, tzinfo=UTC), ahead=2) == []


@pytest.mark.django_db
def test_an_event_in_a_month_without_partition_is_stored_and_moves_into_its_month(support_bot: Any) -> None:
    event = make_retrieval_event(
        support_bot.agent, query="far", context="- x", created_at=datetime(2041, 6, 3, tzinfo=UTC)
    )
    assert partition_of(event) == "governance_retrievalevent_default"

    retention.ensure_partitions(datetime(2041, 6, 1, tzinfo=UTC), ahead=0)

    assert partition_of(event) == "governance_retrievalevent_p204106"
    moved = RetrievalEvent.objects.get(pk=event.pk)
    assert (moved.query, moved.context, moved.created_at) == ("far", "- x", event.created_at)
    assert checkpoints.verify_retrieval_seals() is None
    # Still append-only, in its new partition and in the default one it left.
    with pytest.raises(DatabaseError, match="Cannot delete"), transaction.atomic():
        RetrievalEvent.objects.filter(pk=event.pk).delete()


@pytest.mark.django_db
def test_expiry_drops_the_old_months_only_and_records_each_in_its_projects_chain(
    support_bot: Any, outsider_bot: Any
) -> None:
    retention.ensure_partitions(datetime(2025, 2, 1, tzinfo=UTC), ahead=0)
    january = [
        make_retrieval_event(support_bot.agent, query="a", context="- a", created_at=OLD),
        make_retrieval_event(support_bot.agent, query="b", context="- b", created_at=OLD),
        make_retrieval_event(outsider_bot.agent, query="c", context="- c", created_at=OLD),
    ]
    february = make_retrieval_event(
        support_bot.agent, query="d", context="- d", created_at=datetime(2025, 2, 14, tzinfo=UTC)
    )
    recent = make_retrieval_event(support_bot.agent, query="e", context="- e")
    RetrievalFeedback.objects.create(event=january[0], used=["F-1"])
    project = support_bot.agent.project
    derived = FactFactory.create(project=project, authority=2, derived_from_retrieval=january[1])
    kept = FactFactory.create(project=project, authority=2, derived_from_retrieval=recent)
    write = support_bot.write(
        "Prefers tea", key="drink", kind="preference", derived_from_retrieval=february.pk
    )
    checkpoints.write_checkpoints()

    done = retention.run_upkeep()

    # January sat in the default partition (no partition of its own), February in its own.
    assert done.expired == {"2025-02": 1, "2025-01": 3}
    assert set(RetrievalEvent.objects.values_list("pk", flat=True)) == {recent.pk}
    assert not partition_exists("governance_retrievalevent_p202501")
    assert not partition_exists("governance_retrievalevent_p202502")
    entries = {
        (e.project_id, e.data["month"]): e.data
        for e in AuditEntry.objects.filter(action=retention.EXPIRED).order_by("sequence")
    }
    assert set(entries) == {
        (support_bot.agent.project_id, "2025-01"),
        (outsider_bot.agent.project_id, "2025-01"),
        (support_bot.agent.project_id, "2025-02"),
    }
    ours = entries[(support_bot.agent.project_id, "2025-01")]
    assert (ours["count"], ours["first_id"], ours["last_id"]) == (2, january[0].pk, january[1].pk)
    assert (ours["feedback_removed"], ours["facts_unlinked"]) == (1, 1)
    assert entries[(support_bot.agent.project_id, "2025-02")]["writes_unlinked"] == 1
    assert entries[(outsider_bot.agent.project_id, "2025-01")]["count"] == 1
    # Feedback went with its event; derived facts and writes keep their cap, lose the pointer.
    assert not RetrievalFeedback.objects.exists()
    assert Fact.objects.get(pk=derived.pk).derived_from_retrieval_id is None
    assert Fact.objects.get(pk=derived.pk).authority == 2
    assert Fact.objects.get(pk=kept.pk).derived_from_retrieval_id == recent.pk
    assert Write.objects.get(pk=write["id"]).derived_from_retrieval_id is None
    # The checkpoint counted the dropped events; the trail accounts for them.
    assert checkpoints.verify_against() is None
    status, out = verify()
    assert status == 0, out
    # A second run finds nothing more to drop.
    assert retention.run_upkeep().expired == {}


@pytest.mark.django_db
def test_a_checkpoint_signed_inside_an_expired_month_counts_only_what_it_saw(support_bot: Any) -> None:
    first = make_retrieval_event(support_bot.agent, query="a", context="- a", created_at=OLD)
    # Signed when the month held one event of the project; a later one arrives after.
    checkpoints.write_checkpoints()
    make_retrieval_event(support_bot.agent, query="b", context="- b", created_at=OLD)
    retention.expire_month(date(2025, 1, 1))

    entry = AuditEntry.objects.get(action=retention.EXPIRED)
    assert entry.data["counts_at_checkpoints"] == {str(first.pk): 1}
    assert checkpoints.verify_against() is None


@pytest.mark.django_db
def test_the_database_refuses_a_drop_without_its_audit_entry_or_before_six_months(support_bot: Any) -> None:
    make_retrieval_event(support_bot.agent, query="a", context="- a", created_at=OLD)
    retention.ensure_partitions(OLD, ahead=0)
    with (
        pytest.raises(DatabaseError, match="matching audit entry"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT governance_expire_retrieval_partition(%s)", [date(2025, 1, 1)])
    this_month = date.today().replace(day=1)
    with (
        pytest.raises(DatabaseError, match="not yet 183 days old"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT governance_expire_retrieval_partition(%s)", [this_month])
    assert RetrievalEvent.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_event_deleted_outside_expiry_is_still_reported(support_bot: Any) -> None:
    make_retrieval_event(
        support_bot.agent, query="a", context="- a", created_at=datetime(2025, 3, 3, tzinfo=UTC)
    )
    recent = [make_retrieval_event(support_bot.agent, query=q, context="- q") for q in ("b", "c")]
    checkpoints.write_checkpoints()
    assert retention.run_upkeep().expired == {"2025-03": 1}
    assert verify()[0] == 0

    tamper(
        "DELETE FROM governance_retrievalevent WHERE id = %s",
        [recent[0].pk],
        table="governance_retrievalevent",
    )

    status, out = verify()
    assert status == 1
    assert "1 of the 3 events recorded up to event" in out
    assert "is gone: it was deleted (1 more were removed at the end of their retention period)" in out


@pytest.mark.django_db(transaction=True)
def test_the_application_role_cannot_drop_or_read_a_partition_directly() -> None:
    this_month = "governance_retrievalevent_p" + datetime.now(UTC).strftime("%Y%m")
    with psycopg.connect(**connection_params(APP_ROLE), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
            conn.execute(f"DROP TABLE {this_month}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(f"SELECT * FROM {this_month}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"ALTER TABLE governance_retrievalevent DETACH PARTITION {this_month}")
    assert partition_exists(this_month)


@pytest.mark.parametrize(("days", "refused"), [("182", True), ("183", False)])
def test_retention_below_six_months_is_refused_at_startup(days: str, refused: bool) -> None:
    settings_loaded = subprocess.run(
        [sys.executable, "-c", "import memoryadmin.settings as s; print(s.RETRIEVAL_RETENTION_DAYS)"],
        env={**os.environ, "RETRIEVAL_RETENTION_DAYS": days},
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    if refused:
        assert settings_loaded.returncode != 0
        assert "RETRIEVAL_RETENTION_DAYS is 182, but retrieval events must be kept at least 183 days" in (
            settings_loaded.stderr
        )
    else:
        assert settings_loaded.stdout.strip() == "183", settings_loaded.stderr


@pytest.mark.django_db
def test_the_daily_beat_task_runs_the_upkeep_on_the_bulk_queue(support_bot: Any) -> None:
    make_retrieval_event(
        support_bot.agent, query="a", context="- a", created_at=datetime(2025, 4, 4, tzinfo=UTC)
    )

    result = tasks.retrieval_upkeep.delay().get()

    assert result["expired"] == {"2025-04": 1}
    assert app.amqp.router.route({}, "governance.tasks.retrieval_upkeep")["queue"].name == "bulk"
    assert settings.CELERY_BEAT_SCHEDULE["retrieval-upkeep"]["task"] == "governance.tasks.retrieval_upkeep"
