"""Append-only tables refuse TRUNCATE too, which row-level triggers never see (R15)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import ProgrammingError, connection, transaction

from governance.models import AuditEntry
from tests.governance.database_helpers import owner_cursor
from tests.governance.review_helpers import propose

APPEND_ONLY = {
    "governance_auditentry",
    "governance_auditcheckpoint",
    "governance_retrievalevent",
    "governance_reviewdecision",
    "governance_supersession",
    "governance_tombstone",
    "governance_policyversion",
    "governance_retrievalfeedback",
    # Row history of tracked models.
    "governance_factevent",
    "governance_writeevent",
    "governance_reviewdecisionevent",
    "governance_supersessionevent",
    "governance_projectevent",
    "governance_agentevent",
    "governance_agentkeyevent",
    "governance_personalaccesstokenevent",
    "governance_policydraftevent",
}


def guarded_tables(*, partitions: bool = False) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgrelid::regclass::text FROM pg_trigger JOIN pg_class c ON c.oid = tgrelid "
            "WHERE NOT tgisinternal AND tgname LIKE %s AND tgenabled = 'O' AND c.relispartition = %s",
            ["pgtrigger_%_no_truncate_%", partitions],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
def test_every_append_only_table_has_a_truncate_guard() -> None:
    assert guarded_tables() == APPEND_ONLY


@pytest.mark.django_db
def test_every_partition_of_the_retrieval_log_has_its_own_truncate_guard() -> None:
    # PostgreSQL does not clone statement triggers to partitions (migration 0034 copies it).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits "
            "WHERE inhparent = 'governance_retrievalevent'::regclass"
        )
        partitions = {row[0] for row in cursor.fetchall()}
    assert "governance_retrievalevent_default" in partitions
    assert guarded_tables(partitions=True) == partitions


@pytest.mark.django_db
@pytest.mark.parametrize("table", sorted(APPEND_ONLY))
def test_truncate_is_refused_to_the_application(table: str, support_bot: Any) -> None:
    propose(support_bot, "Prefers tea to coffee")
    before = AuditEntry.objects.count()

    with (
        pytest.raises(ProgrammingError, match="permission denied"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"TRUNCATE {table} CASCADE")

    assert AuditEntry.objects.count() == before > 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("table", sorted(APPEND_ONLY))
def test_truncate_is_refused_even_to_the_owner(table: str, support_bot: Any) -> None:
    """The role that may run TRUNCATE still meets the statement-level trigger."""
    propose(support_bot, "Prefers tea to coffee")
    before = AuditEntry.objects.count()

    with owner_cursor() as cursor, pytest.raises(psycopg.Error, match="append-only"):
        cursor.execute(f"TRUNCATE {table} CASCADE")

    assert AuditEntry.objects.count() == before > 0


@pytest.mark.django_db(transaction=True)
def test_truncating_a_parent_table_cannot_cascade_into_the_trail(support_bot: Any) -> None:
    propose(support_bot, "Prefers tea to coffee")

    with owner_cursor() as cursor, pytest.raises(psycopg.Error, match="append-only"):
        cursor.execute("TRUNCATE governance_project CASCADE")

    assert AuditEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_truncating_a_partition_of_the_retrieval_log_is_refused_even_to_the_owner(support_bot: Any) -> None:
    with owner_cursor() as cursor, pytest.raises(psycopg.Error, match="append-only"):
        cursor.execute("TRUNCATE governance_retrievalevent_default")
