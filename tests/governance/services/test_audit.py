"""The audit chain's writers share one lock, in Python and in the database."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from governance.services import audit

pytestmark = pytest.mark.django_db


def test_the_database_erasure_function_takes_the_chain_lock_of_the_service():
    # governance_open_erasure writes an audit entry from SQL: with another
    # number it would not wait for services.audit.record, and two entries
    # could claim the same place in a project's chain.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('governance_open_erasure'::regproc)")
        (definition,) = cursor.fetchone()

    assert f"pg_advisory_xact_lock({audit.AUDIT_CHAIN_LOCK_NAMESPACE}," in definition


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
