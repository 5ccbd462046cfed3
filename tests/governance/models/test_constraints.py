"""What must always hold is enforced by the database itself (issue 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from governance.models import Fact
from tests.personas import FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db


def test_authority_outside_1_to_5_is_rejected(project):
    with pytest.raises(IntegrityError, match="fact_authority_1_5"), transaction.atomic():
        FactFactory(project=project, authority=7)


def test_valid_to_before_valid_from_is_rejected(project):
    now = timezone.now()
    with pytest.raises(IntegrityError, match="fact_valid_from_before_valid_to"), transaction.atomic():
        FactFactory(project=project, valid_from=now, valid_to=now - timedelta(days=1))


def test_second_active_fact_for_same_principal_and_key_is_rejected(project):
    principal = PrincipalFactory(project=project)
    FactFactory(
        project=project, principal=principal, key="deployment_region", statement="Deploys to us-east-1"
    )
    with pytest.raises(IntegrityError, match="fact_one_active_per_key"), transaction.atomic():
        FactFactory(project=project, principal=principal, key="deployment_region", statement="eu-west-2")
    # A superseded one beside the active one is fine: that is the history.
    FactFactory(project=project, principal=principal, key="deployment_region", status="superseded")


def test_two_active_project_facts_with_one_key_are_rejected(project):
    FactFactory(project=project, key="python_version", statement="Python 3.11")
    with pytest.raises(IntegrityError, match="fact_one_active_per_key"), transaction.atomic():
        FactFactory(project=project, key="python_version", statement="Python 3.13")


@pytest.mark.parametrize(
    ("field", "value", "constraint"),
    [
        ("status", "deleted", "fact_status_known"),
        ("kind", "rumour", "fact_kind_known"),
        ("confidence", "certain", "fact_confidence_known"),
        ("source_type", "gossip", "fact_source_type_known"),
    ],
)
def test_closed_sets_are_enforced(project, field, value, constraint):
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        FactFactory(project=project, **{field: value})


@pytest.mark.parametrize(
    "table",
    ["governance_factevent", "governance_projectevent", "governance_agentkeyevent", "governance_auditentry"],
)
def test_history_rows_refuse_update_and_delete_even_with_raw_sql(project, support_bot, table):
    FactFactory(project=project)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        assert cursor.fetchone()[0] > 0
    for statement in (f"UPDATE {table} SET pgh_created_at = now()", f"DELETE FROM {table}"):
        if table == "governance_auditentry":
            statement = statement.replace("pgh_created_at", "created_at")
        with pytest.raises(Exception, match="Cannot"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)


def test_fact_history_records_actor_of_the_change(project):
    import pghistory

    with pghistory.context(actor="user:riley"):
        fact = FactFactory(project=project)
    event = Fact.pgh_event_model.objects.get(pgh_obj=fact)  # type: ignore[attr-defined]  # added by pghistory
    assert event.pgh_context["actor"] == "user:riley"
