"""The application's database role: what it is refused, and the one door to erasure (R15, R8).

Every test here runs on the application's own connection, the role the web
processes, workers and commands use; the embedded test server is set up the
same way as production (docs/operations.md, "Database roles").
"""

from __future__ import annotations

from typing import Any

import pgtrigger
import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from governance import rls
from governance.models import AuditEntry, ErasureGrant, Fact, Write
from governance.selectors.audit import verify_chain
from governance.services import audit
from governance.services.facts import withdraw_fact
from governance.services.history import open_erasure
from tests.governance.database_helpers import connection_params, owner_cursor, owner_role
from tests.governance.review_helpers import propose

pytestmark = pytest.mark.django_db

STATEMENT = "Prefers tea to coffee"


@pytest.fixture
def remembered(support_bot: Any) -> Fact:
    write = propose(support_bot, STATEMENT, source_type="user_statement")
    assert write.status == "active"
    assert write.fact is not None
    return write.fact


def refused(sql: str, params: list[Any] | None = None) -> str:
    """Run ``sql`` as the application; the database's refusal (the test fails if there is none)."""
    with pytest.raises(DatabaseError) as caught, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(caught.value)


def one(sql: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def test_the_application_role_owns_nothing_and_bypasses_nothing() -> None:
    role = one("SELECT current_user")
    assert role == settings.DATABASES["default"]["USER"] != owner_role()
    me = "(SELECT oid FROM pg_roles WHERE rolname = current_user)"
    powers = "rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb"
    assert one(f"SELECT {powers} FROM pg_roles WHERE oid = {me}") is False
    assert one(f"SELECT count(*) FROM pg_class WHERE relowner = {me}") == 0
    assert one(f"SELECT count(*) FROM pg_proc WHERE proowner = {me}") == 0


def test_truncate_is_refused(remembered: Fact) -> None:
    assert "permission denied" in refused("TRUNCATE governance_auditentry")
    assert "permission denied" in refused("TRUNCATE governance_fact CASCADE")
    assert AuditEntry.objects.filter(project=remembered.project).exists()


def test_disabling_a_trigger_is_refused(remembered: Fact) -> None:
    assert "must be owner" in refused("ALTER TABLE governance_auditentry DISABLE TRIGGER ALL")
    assert "must be owner" in refused("ALTER TABLE governance_factevent DISABLE TRIGGER USER")


def test_dropping_a_table_is_refused(remembered: Fact) -> None:
    assert "must be owner" in refused("DROP TABLE governance_auditentry CASCADE")
    assert "must be owner" in refused("DROP TABLE governance_fact CASCADE")
    assert Fact.objects.filter(pk=remembered.pk).exists()


def test_creating_a_role_and_becoming_the_owner_are_refused() -> None:
    assert "permission denied" in refused("CREATE ROLE mallory LOGIN SUPERUSER")
    assert "permission denied" in refused(f'SET ROLE "{owner_role()}"')
    assert "permission denied" in refused("SET SESSION AUTHORIZATION postgres")


def test_the_old_erasure_switch_no_longer_lets_history_be_rewritten(remembered: Fact) -> None:
    message = refused(
        "SELECT set_config('memoryadmin.erasure', 'on', true); "
        "UPDATE governance_factevent SET statement = 'never said that' WHERE pgh_obj_id = %s",
        [remembered.pk],
    )

    assert "Cannot update rows" in message
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM governance_factevent WHERE pgh_obj_id = %s", [remembered.pk])
        assert {row[0] for row in cursor.fetchall()} == {STATEMENT}


def test_skipping_the_append_only_triggers_through_pgtrigger_ignore_is_refused(remembered: Fact) -> None:
    entry = AuditEntry.objects.filter(project=remembered.project).first()
    assert entry is not None

    with pytest.raises(DatabaseError, match="Cannot skip"), pgtrigger.ignore(), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(reason="nothing to see")
    # By hand, naming the trigger itself, as an attacker reading pg_trigger would.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger "
            "WHERE tgrelid = 'governance_factevent'::regclass AND tgname LIKE %s",
            ["pgtrigger_history_no_update_%"],
        )
        (trigger,) = cursor.fetchone()
    message = refused(
        "SELECT set_config('pgtrigger.ignore', %s, true); "
        "UPDATE governance_factevent SET statement = '' WHERE pgh_obj_id = %s",
        ["{" + trigger + "}", remembered.pk],
    )

    assert "Cannot skip" in message
    assert AuditEntry.objects.get(pk=entry.pk).reason == entry.reason
    assert verify_chain() is None


def test_an_erasure_grant_cannot_be_written_by_the_application(remembered: Fact) -> None:
    entry = AuditEntry.objects.filter(project=remembered.project).first()
    assert entry is not None

    message = refused(
        "INSERT INTO governance_erasuregrant (transaction_id, audit_entry_id, created_at) "
        "VALUES (pg_current_xact_id()::text::bigint, %s, now()); "
        "UPDATE governance_factevent SET statement = '' WHERE pgh_obj_id = %s",
        [entry.pk, remembered.pk],
    )

    assert "only through governance_open_erasure" in message
    assert not ErasureGrant.objects.exists()


def test_an_erasure_opened_by_hand_is_recorded_and_sealed_into_the_chain(remembered: Fact) -> None:
    """The function takes no place in the chain from its caller: its entry is appended unsealed,
    and the sealer links it like any other, so every grant sits in the chain."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT governance_open_erasure(%s, 'mallory', NULL, 'fact', %s, 'because', '{}'::jsonb, '', "
            "now())",
            [remembered.project_id, str(remembered.pk)],
        )
        (entry_id,) = cursor.fetchone()

    entry = AuditEntry.objects.get(pk=entry_id)
    assert (entry.action, entry.sequence, entry.entry_hash) == ("erasure.opened", None, "")
    assert ErasureGrant.objects.get().audit_entry == entry
    audit.seal_all()
    entry.refresh_from_db()
    assert entry.sequence == AuditEntry.objects.filter(project=remembered.project).count()
    assert verify_chain() is None


def test_withdrawal_erases_history_through_the_definer_function_and_records_it(
    remembered: Fact, reviewer: Any
) -> None:
    withdraw_fact(
        remembered, reason="She asked us to forget it", actor=f"user:{reviewer.username}", user=reviewer
    )

    opened = AuditEntry.objects.get(action="erasure.opened", object_id=str(remembered.pk))
    assert opened.actor == f"user:{reviewer.username}"
    assert opened.actor_user == reviewer
    assert opened.reason == "She asked us to forget it"
    assert ErasureGrant.objects.get().audit_entry == opened
    # The grant comes before the withdrawal it allowed, in the same chain.
    audit.seal_all()
    opened.refresh_from_db()
    withdrawn = AuditEntry.objects.get(action="fact.withdrawn", object_id=str(remembered.pk))
    assert opened.sequence is not None and withdrawn.sequence is not None
    assert opened.sequence < withdrawn.sequence
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM governance_factevent WHERE pgh_obj_id = %s", [remembered.pk])
        assert {row[0] for row in cursor.fetchall()} == {""}
    assert Write.objects.get(fact=remembered).statement == ""
    assert verify_chain() is None


def test_an_erasure_grant_lasts_only_for_its_transaction(remembered: Fact) -> None:
    with transaction.atomic():
        open_erasure(remembered.project, remembered, reason="testing the grant's reach", actor="system:test")
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE governance_factevent SET statement = '' WHERE pgh_obj_id = %s", [remembered.pk]
            )
            assert cursor.rowcount > 0
        transaction.set_rollback(True)

    assert "Cannot update rows" in refused(
        "UPDATE governance_factevent SET statement = '' WHERE pgh_obj_id = %s", [remembered.pk]
    )
    assert verify_chain() is None


@pytest.fixture
def two_projects(support_bot: Any, outsider_bot: Any) -> tuple[Fact, Fact]:
    ours = propose(support_bot, STATEMENT, source_type="user_statement").fact
    theirs = propose(outsider_bot, "Prefers coffee to tea", source_type="user_statement").fact
    assert ours is not None and theirs is not None
    return ours, theirs


@pytest.mark.django_db(transaction=True)
def test_without_the_project_set_the_application_sees_no_memory(two_projects: tuple[Fact, Fact]) -> None:
    """A connection of the application's role that sets no project (a query that forgot its
    scope) gets nothing from the four tables, though the rows are there."""
    ours, _ = two_projects
    tables = ("governance_fact", "governance_write", "governance_retrievalevent", "governance_auditentry")
    with psycopg.connect(**connection_params(one("SELECT current_user")), autocommit=True) as conn:
        # count(*) always answers one row; fetchone() is typed as possibly None.
        unset = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}  # type: ignore[index]
        conn.execute("SELECT set_config('memoryadmin.projects', %s, false)", [str(ours.project_id)])
        mine = conn.execute("SELECT id FROM governance_fact").fetchall()
        conn.execute("SET memoryadmin.projects = 'all'")
        # count(*) always answers one row; fetchone() is typed as possibly None.
        every = conn.execute("SELECT count(*) FROM governance_fact").fetchone()[0]  # type: ignore[index]

    assert unset == dict.fromkeys(tables, 0)
    assert mine == [(ours.pk,)]
    assert every == 2
    with owner_cursor() as cursor:
        cursor.execute("SELECT count(*) FROM governance_fact")
        assert cursor.fetchone() == (2,)


def test_a_scoped_context_reads_only_its_projects_rows(two_projects: tuple[Fact, Fact]) -> None:
    ours, theirs = two_projects

    with rls.scope(rls.projects([ours.project_id])):
        assert list(Fact.objects.values_list("pk", flat=True)) == [ours.pk]
        assert not AuditEntry.objects.filter(project=theirs.project_id).exists()
        assert set(Write.objects.values_list("project_id", flat=True)) == {ours.project_id}
    with rls.scope(rls.NOTHING):
        assert Fact.objects.count() == 0
    assert Fact.objects.count() == 2


def test_a_scoped_context_cannot_write_into_another_project(two_projects: tuple[Fact, Fact]) -> None:
    ours, theirs = two_projects

    with rls.scope(rls.projects([ours.project_id])):
        with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
            Fact.objects.filter(pk=ours.pk).update(project=theirs.project)
        # Invisible rows are not there to change.
        assert Fact.objects.filter(pk=theirs.pk).update(status_reason="mine now") == 0

    assert Fact.objects.get(pk=theirs.pk).status_reason != "mine now"


def test_an_agents_request_is_scoped_to_its_project(
    two_projects: tuple[Fact, Fact], support_bot: Any, outsider_bot: Any
) -> None:
    ours, _ = two_projects
    seen: list[list[int]] = []

    def spy(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if 'FROM "governance_fact"' in sql:
            with connection.cursor() as cursor:
                cursor.execute("SELECT id FROM governance_fact ORDER BY id")
                seen.append([row[0] for row in cursor.fetchall()])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        response = support_bot.client.get(f"/api/v1/facts/{ours.pk}")

    assert response.status_code == 200
    # Every look at the facts table during the request saw only the agent's project.
    assert seen and all(ids == [ours.pk] for ids in seen)
