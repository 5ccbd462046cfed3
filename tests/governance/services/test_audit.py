"""Appending to the audit trail without a lock, and sealing it into the chain afterwards (R15, issue 13)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from governance.models import AuditEntry, FeedEvent, Project
from governance.rules.audit import GENESIS, entry_digest
from governance.selectors.audit import verify_chain
from governance.services import audit
from governance.tasks import seal_audit_chains
from tests.governance.database_helpers import tamper
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(project: Project) -> Project:
    """The personas' project with the entries its setup recorded sealed: tests start from a sealed head."""
    audit.seal_all()
    return project


@pytest.fixture
def other_project(other_project: Project) -> Project:
    audit.seal_all()
    return other_project


def _head(project: Project) -> int:
    return AuditEntry.objects.filter(project=project, sequence__isnull=False).count()


def _record(project: Project, n: int = 1, action: str = "project.noted") -> list[AuditEntry]:
    with transaction.atomic():
        return [audit.record(project, action, project, reason=f"note {i}") for i in range(n)]


def _refused(sql: str, params: list[Any]) -> str:
    with pytest.raises(DatabaseError) as caught, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(caught.value)


def test_the_database_sealing_function_takes_the_chain_lock_of_the_service():
    # governance_seal_audit_entries seals from SQL: with another number it
    # would not wait for services.audit.seal, and two sealers could give two
    # entries the same place in a project's chain.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('governance_seal_audit_entries'::regproc)")
        (definition,) = cursor.fetchone()

    assert f"pg_advisory_xact_lock({audit.AUDIT_CHAIN_LOCK_NAMESPACE}," in definition


def test_the_erasure_function_appends_unsealed_without_the_chain_lock():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('governance_open_erasure'::regproc)")
        (definition,) = cursor.fetchone()

    assert "pg_advisory_xact_lock" not in definition


def test_recording_is_one_insert_with_no_lock_and_no_read_of_the_chain(project):
    _record(project, 2)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        entry = audit.record(project, "project.noted", project, reason="one more")

    statements = [q["sql"] for q in queries.captured_queries if "governance_auditentry" in q["sql"]]
    assert len(statements) == 1 and statements[0].startswith("INSERT")
    assert not any("pg_advisory" in q["sql"] for q in queries.captured_queries)
    assert (entry.sequence, entry.previous_hash, entry.entry_hash) == (None, "", "")


@pytest.mark.django_db(transaction=True)
def test_two_transactions_of_one_project_record_without_waiting_and_are_chained_in_commit_order(project):
    """The first writer holds its transaction open after recording; the second records and commits
    meanwhile (with a lock timeout, so waiting would fail it). The sealer, run after each commit,
    chains the second entry first although its id is higher."""
    base = _head(project)
    recorded, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    firsts: list[AuditEntry] = []

    def first() -> None:
        try:
            with transaction.atomic():
                firsts.append(audit.record(project, "project.noted", project, reason="first, held open"))
                recorded.set()
                release.wait(10)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert recorded.wait(10)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '1s'")
            second = audit.record(project, "project.noted", project, reason="second, while the first is open")
        # Sealed on commit (the task runs eagerly in tests); the first is not committed yet.
        second.refresh_from_db()
        assert second.sequence == base + 1
    finally:
        release.set()
        thread.join(10)

    assert not errors
    (held,) = firsts
    held.refresh_from_db()
    assert held.pk < second.pk
    assert (held.sequence, held.previous_hash) == (base + 2, second.entry_hash)
    assert verify_chain(project.pk) is None


def test_sealing_gives_entries_their_places_and_hashes_in_id_order(project):
    base = _head(project)
    entries = _record(project, 3)

    assert audit.seal(project.pk) == 3
    sealed = list(AuditEntry.objects.filter(project=project, sequence__gt=base).order_by("sequence"))
    assert [e.pk for e in sealed] == [e.pk for e in entries]
    assert [e.sequence for e in sealed] == [base + 1, base + 2, base + 3]
    assert AuditEntry.objects.get(project=project, sequence=1).previous_hash == GENESIS
    assert [e.previous_hash for e in sealed[1:]] == [e.entry_hash for e in sealed[:-1]]
    assert all(entry_digest(e) == e.entry_hash for e in sealed)
    assert audit.seal(project.pk) == 0
    assert verify_chain(project.pk) is None


def test_sealing_continues_the_chain_from_its_sealed_head(project):
    _record(project, 2)
    audit.seal(project.pk)
    head = AuditEntry.objects.get(project=project, sequence=_head(project))
    (later,) = _record(project)

    audit.seal(project.pk)

    later.refresh_from_db()
    assert (later.sequence, later.previous_hash) == (_head(project), head.entry_hash)
    assert later.sequence == (head.sequence or 0) + 1
    assert verify_chain(project.pk) is None


def test_the_application_cannot_update_an_entry_sealed_or_not(project):
    unsealed, sealed = _record(project, 2)
    audit.seal(project.pk)
    (unsealed,) = _record(project)

    for entry in (sealed, unsealed):
        with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic():
            AuditEntry.objects.filter(pk=entry.pk).update(reason="nothing to see")
    # Sealing by hand, with the function's own flag set, is refused too: the
    # flag counts only for the role that owns the table (inside the function).
    message = _refused(
        "SELECT set_config('memoryadmin.sealing_audit', 'on', true); "
        "UPDATE governance_auditentry SET sequence = 99, previous_hash = %s, entry_hash = %s WHERE id = %s",
        [GENESIS, "f" * 64, unsealed.pk],
    )
    assert "Cannot update" in message
    with pytest.raises(DatabaseError, match="Cannot delete"), transaction.atomic():
        AuditEntry.objects.filter(pk=unsealed.pk).delete()


def test_the_sealing_function_refuses_to_overwrite_a_sealed_entry(project):
    (entry,) = _record(project)
    audit.seal(project.pk)
    entry.refresh_from_db()

    message = _refused(
        "SELECT governance_seal_audit_entries(%s, %s, %s)", [project.pk, [entry.pk], ["f" * 64]]
    )

    assert "Only unsealed entries" in message
    assert AuditEntry.objects.get(pk=entry.pk).entry_hash == entry.entry_hash


def test_the_sealing_function_refuses_an_entry_of_another_chain(project, other_project):
    (ours,) = _record(project)

    message = _refused(
        "SELECT governance_seal_audit_entries(%s, %s, %s)", [other_project.pk, [ours.pk], ["f" * 64]]
    )

    assert "Only unsealed entries" in message
    assert AuditEntry.objects.get(pk=ours.pk).sequence is None


def test_a_bogus_hash_handed_to_the_sealing_function_is_caught_by_verification(project):
    _record(project)
    audit.seal(project.pk)
    (entry,) = _record(project)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT governance_seal_audit_entries(%s, %s, %s)", [project.pk, [entry.pk], ["f" * 64]]
        )

    broken = verify_chain(project.pk)

    assert broken is not None
    assert (broken.sequence, broken.entry_id, broken.problem) == (
        _head(project),
        entry.pk,
        "content does not match its hash",
    )


def test_the_beat_task_seals_every_chain_that_waits(project, other_project):
    _record(project, 2)
    _record(other_project)

    assert seal_audit_chains.delay().get() == 3

    assert not AuditEntry.objects.filter(sequence__isnull=True).exists()
    assert verify_chain() is None


def test_the_change_feed_announces_entries_as_they_are_sealed_in_chain_order(project):
    with transaction.atomic():
        first = audit.record(project, "policy.published", project, data={"version": 1})
        audit.record(project, "project.noted", project)
        second = audit.record(project, "policy.published", project, data={"version": 2})
    assert not FeedEvent.objects.exists()

    audit.seal(project.pk)

    events = list(FeedEvent.objects.order_by("pk"))
    assert [e.audit_entry_id for e in events] == [first.pk, second.pk]
    base = AuditEntry.objects.get(pk=first.pk).sequence or 0
    assert [e.payload["audit"]["sequence"] for e in events] == [base, base + 2]
    assert events[1].payload["audit"]["entry_hash"] == AuditEntry.objects.get(pk=second.pk).entry_hash


def test_an_entry_recorded_and_sealed_in_one_transaction_names_its_place(project):
    _record(project)
    with transaction.atomic():
        entry = audit.record_sealed(project, "project.noted", project, reason="a receipt needs its place")
        assert entry.sequence == _head(project)
        assert AuditEntry.objects.filter(project=project, sequence__isnull=True).count() == 0
        assert entry.entry_hash == entry_digest(entry)
    assert verify_chain(project.pk) is None


def test_a_waiting_backlog_is_counted_and_warned_about_once_overdue(project, settings):
    _record(project)
    assert audit.backlog(project.pk, only_project=True).entries == 1
    assert audit.backlog_warning(audit.backlog()) == ""

    settings.AUDIT_SEAL_OVERDUE_SECONDS = -1
    warning = audit.backlog_warning(audit.backlog())

    assert warning.startswith("1 audit entry was still waiting to be added to the chain")
    assert "background worker" in warning


@pytest.mark.django_db(transaction=True)
def test_tampering_with_a_sealed_entry_is_detected(project):
    entries = _record(project, 3)
    audit.seal(project.pk)

    tamper("UPDATE governance_auditentry SET reason = 'rewritten' WHERE id = %s", [entries[1].pk])

    broken = verify_chain(project.pk)
    assert broken is not None and broken.entry_id == entries[1].pk


def test_a_field_change_is_saved_and_recorded_with_what_it_was_in_the_same_transaction(project, reviewer):
    with transaction.atomic():
        entry = audit.change_field(
            project,
            "project.second_approval_changed",
            project,
            "require_second_approval",
            True,
            reason="Two people from now on",
            actor_user=reviewer,
            data={"note": "kept"},
        )
    project.refresh_from_db()
    assert project.require_second_approval is True
    assert entry.data == {"from": False, "to": True, "note": "kept"}
    assert (entry.object_type, entry.object_id, entry.actor_user_id) == (
        "project",
        str(project.pk),
        reviewer.pk,
    )


def test_beat_seals_every_few_seconds(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["seal-audit-chains"]
    assert entry["task"] == "governance.tasks.seal_audit_chains"
    assert entry["schedule"].total_seconds() == settings.AUDIT_SEAL_SECONDS <= 10


def test_entries_without_a_project_form_a_chain_of_their_own(project):
    with transaction.atomic():
        first = audit.record(None, "admin.noted", ("user", 1), reason="system work")
        second = audit.record(None, "admin.noted", ("user", 2), reason="system work")

    audit.seal_all()

    first.refresh_from_db()
    second.refresh_from_db()
    assert second.sequence == (first.sequence or 0) + 1 and second.previous_hash == first.entry_hash
    assert not AuditEntry.objects.filter(sequence__isnull=True).exists()
    assert verify_chain() is None


@pytest.fixture
def seals_sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The seal tasks handed to the broker, each still sent for real."""
    from governance.tasks import seal_audit_chain

    sent: list[Any] = []
    send = seal_audit_chain.apply_async

    def counted(args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        sent.append(tuple(args or ()))
        return send(args, kwargs, **options)

    monkeypatch.setattr(seal_audit_chain, "apply_async", counted)
    audit._seals.flush()  # nothing gathered by an earlier test
    yield sent
    audit._seals.flush()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_commits_in_quick_succession_share_one_seal_task_and_are_all_sealed(
    project, real_worker, seals_sent, settings
):
    settings.TASK_GATHER_MS = 1500  # wide, so a slow machine still commits inside it
    entries = [entry for _ in range(5) for entry in _record(project)]
    assert seals_sent == []  # gathered, not sent yet

    # The one task, sent when the moment is over, seals all five in the worker process.
    wait_until(
        lambda: AuditEntry.objects.filter(pk__in=[e.pk for e in entries], sequence__isnull=True).count() == 0,
        timeout=60,
    )
    assert seals_sent == [(project.pk,)]
    assert verify_chain(project.pk) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_commit_after_the_moment_is_sealed_by_a_task_of_its_own(project, real_worker, seals_sent, settings):
    settings.TASK_GATHER_MS = 200
    first = _record(project)
    wait_until(lambda: seals_sent, timeout=10)
    second = _record(project)

    wait_until(lambda: len(seals_sent) == 2, timeout=10)
    ids = [first[0].pk, second[0].pk]
    wait_until(lambda: not AuditEntry.objects.filter(pk__in=ids, sequence__isnull=True).exists(), timeout=60)


@pytest.mark.django_db(transaction=True)
def test_eager_tasks_seal_each_commit_at_once(project, seals_sent):
    # Tests and CELERY_TASK_ALWAYS_EAGER run tasks in place: nothing waits to be gathered.
    first = _record(project)
    second = _record(project)
    assert AuditEntry.objects.filter(pk__in=[first[0].pk, second[0].pk], sequence__isnull=True).count() == 0
    assert seals_sent == [(project.pk,), (project.pk,)]
