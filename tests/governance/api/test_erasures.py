"""Forgetting a person over the API (issue 18 item 4): agents with the forget scope, reviewers."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from governance.context import actor_scope
from governance.models import Fact, Principal, Project
from governance.services import credentials
from tests.personas import AgentPersona, make_user, token_client

pytestmark = pytest.mark.django_db

PERSON = "cust-2090"


def offer(bot: AgentPersona, statement: str, principal: str = PERSON) -> dict[str, Any]:
    response = bot.client.post(
        "/api/v1/writes",
        {
            "principal": principal,
            "kind": "preference",
            "statement": statement,
            "source": {"type": "user_statement", "ref": "chat:77", "observed_at": "2026-01-01T00:00:00Z"},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def forget(client: APIClient, url: str, **body: Any) -> Any:
    return client.post(url, {"reason": "Data-protection request DP-7", **body}, format="json")


@pytest.fixture
def remembered(support_bot: AgentPersona) -> list[dict[str, Any]]:
    return [offer(support_bot, "Prefers window seats"), offer(support_bot, "Reads in Portuguese")]


def test_an_agent_dry_run_counts_and_changes_nothing(
    support_bot, remembered, django_capture_on_commit_callbacks
):
    response = forget(support_bot.client, f"/api/v1/principals/{PERSON}/forget", dry_run=True)

    assert response.status_code == 200
    body = response.json()
    assert body["counts"]["facts"]["preference"] == 2 and body["counts"]["writes"] == 2
    assert body["total"] >= 4
    assert Fact.objects.filter(principal__external_id=PERSON, status="active").count() == 2


def test_an_agent_forgets_a_person_and_reads_the_receipt_then_asking_again_erases_nothing_new(
    support_bot, remembered, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = forget(support_bot.client, f"/api/v1/principals/{PERSON}/forget")

    assert response.status_code == 202
    job = support_bot.client.get(response["Location"]).json()
    assert job["status"] == "succeeded" and job["progress"]["percent"] == 100
    receipt = job["receipt"]
    assert receipt["counts"]["facts"]["preference"] == 2
    assert len(receipt["tombstones"]) == 2 and receipt["nothing_new"] is False
    assert receipt["requested_by"] == "agent:support-bot"
    assert receipt["principal"] == job["principal"] != PERSON
    # What the agent believed about the person is gone.
    assert support_bot.client.get(f"/api/v1/principals/{PERSON}/memories").status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        again = forget(support_bot.client, f"/api/v1/principals/{PERSON}/forget")
    second = support_bot.client.get(again["Location"]).json()["receipt"]
    assert second["nothing_new"] is True and second["total"] == 0
    assert second["principal"] == receipt["principal"]


def test_forgetting_needs_the_forget_scope(support_bot, remembered):
    with actor_scope("test"):
        _, secret = credentials.create_agent_key(support_bot.agent, scopes=["read", "write"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    response = forget(client, f"/api/v1/principals/{PERSON}/forget")

    assert response.status_code == 403
    assert response.json()["error"]["fields"] == {"scope": ["forget"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": ""}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"reason": "x" * 2001}, "reason"),
        ({}, "reason"),
    ],
)
def test_a_bad_reason_is_a_400_and_erases_nothing(support_bot, remembered, body, field):
    response = support_bot.client.post(f"/api/v1/principals/{PERSON}/forget", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert Principal.objects.filter(external_id=PERSON).exists()


def test_an_unknown_person_or_another_projects_erasure_is_a_404(
    support_bot, outsider_bot, remembered, django_capture_on_commit_callbacks
):
    assert forget(support_bot.client, "/api/v1/principals/nobody-here/forget").status_code == 404
    # Another project's agent cannot reach this person, nor the job.
    assert forget(outsider_bot.client, f"/api/v1/principals/{PERSON}/forget").status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        location = forget(support_bot.client, f"/api/v1/principals/{PERSON}/forget")["Location"]
    assert outsider_bot.client.get(location).status_code == 404


def test_people_who_may_withdraw_forget_in_the_governance_api_and_others_may_not(
    project: Project, reviewer, auditor, outsider, remembered, django_capture_on_commit_callbacks
):
    url = f"/api/v1/admin/projects/{project.slug}/principals/{PERSON}/forget"
    assert forget(token_client(auditor), url).status_code == 403
    assert forget(token_client(outsider), url).status_code == 404
    assert Fact.objects.filter(principal__external_id=PERSON, status="active").count() == 2

    client = token_client(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = forget(client, url)

    assert response.status_code == 202
    job = client.get(response["Location"]).json()
    assert job["receipt"]["requested_by"] == f"user:{reviewer.username}"
    # An auditor reads the receipt; someone from another project does not.
    assert token_client(auditor).get(response["Location"]).status_code == 200
    assert token_client(outsider).get(response["Location"]).status_code == 404


def test_the_schema_describes_the_forget_operations_with_typed_bodies(db):
    make_user("schema-reader", None)
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    for path in (
        "/api/v1/principals/{external_id}/forget",
        "/api/v1/admin/projects/{project}/principals/{external_id}/forget",
    ):
        post = schema["paths"][path]["post"]
        assert "$ref" in str(post["requestBody"]["content"]["application/json"]["schema"])
        assert "ErasureJob" in str(post["responses"]["202"]) and "DryRun" in str(post["responses"]["200"])
    for path in ("/api/v1/erasures/{erasure_id}", "/api/v1/admin/erasures/{erasure_id}"):
        assert "ErasureJob" in str(schema["paths"][path]["get"]["responses"]["200"])
    assert "Receipt" in schema["components"]["schemas"]
