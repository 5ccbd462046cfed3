"""Issue 2's must-shows: the database, the worker, the setup commands, the schema."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from governance.models import AgentKey, Fact, Membership, PersonalAccessToken
from tests.helpers import wait_until
from tests.personas import FactFactory


@pytest.mark.django_db
def test_embedded_database_runs_pgvector_0_8():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cursor.fetchone()
        cursor.execute("SHOW server_version")
        (server,) = cursor.fetchone()
    assert version.startswith("0.8"), version
    assert int(server.split(".")[0]) >= 15


@pytest.mark.django_db
def test_a_vector_round_trips_through_the_orm(project):
    vector = [0.0] * 384
    vector[0], vector[383] = 0.25, -1.5
    fact = FactFactory.create(project=project, embedding=vector)
    stored = Fact.objects.get(pk=fact.pk).embedding
    assert stored is not None and len(stored) == 384
    assert stored[0] == pytest.approx(0.25) and stored[383] == pytest.approx(-1.5)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_task_sent_through_the_broker_runs_in_a_real_worker(project, real_worker):
    from governance.tasks import embed_fact

    fact = FactFactory.create(project=project, statement="The customer prefers invoices by email")
    assert fact.embedded_at is None
    result = embed_fact.delay(fact.pk)
    assert result.id
    # The worker process is another OS process on another connection: the
    # only way the vector gets here is through the broker and the database.
    embedded = wait_until(
        lambda: Fact.objects.filter(pk=fact.pk, embedded_at__isnull=False).first(), timeout=120
    )
    assert len(embedded.embedding) == 384


@pytest.mark.django_db
def test_create_agent_key_prints_a_key_that_authenticates_until_revoked():
    out, err = io.StringIO(), io.StringIO()
    call_command("create_agent_key", "acme", "support-bot", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert secret.startswith("mak_")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/writes/999999").status_code == 404  # authenticated, no such write
    from governance.context import actor_scope
    from governance.services import credentials

    with actor_scope("test"):
        credentials.revoke_agent_key(AgentKey.objects.get(), reason="test")
    assert client.get("/api/v1/writes/999999").status_code == 401


@pytest.mark.django_db
def test_create_user_token_creates_user_role_membership_and_token():
    out = io.StringIO()
    call_command(
        "create_user_token",
        "riley",
        "--role",
        "reviewer",
        "--project",
        "acme",
        stdout=out,
        stderr=io.StringIO(),
    )
    secret = out.getvalue().strip()
    assert secret.startswith("mpt_")
    token = PersonalAccessToken.objects.get()
    assert token.user.username == "riley"
    assert Membership.objects.get(user=token.user, project__slug="acme").role == "reviewer"
    assert token.digest != secret and secret not in token.digest


@pytest.mark.django_db
def test_openapi_schema_and_docs_answer(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/writes" in schema.content
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.django_db
def test_console_requires_login_and_shows_home(client, reviewer):
    assert client.get("/").status_code == 302
    client.force_login(reviewer)
    page = client.get("/")
    assert page.status_code == 200
    assert b"ACME Corp" in page.content
