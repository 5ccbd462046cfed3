"""Governance API: GET /api/v1/admin/reviews and POST /api/v1/admin/reviews/{id}/decision."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from governance.models import Fact, ReviewDecision, Write
from governance.services import reviews
from tests.governance.review_helpers import PENDING, QUARANTINED, propose
from tests.personas import token_client

pytestmark = pytest.mark.django_db

LIST = "/api/v1/admin/reviews"


def decision_url(write_id: int) -> str:
    return f"/api/v1/admin/reviews/{write_id}/decision"


@pytest.fixture
def riley(reviewer) -> APIClient:
    return token_client(reviewer)


@pytest.fixture
def queue(support_bot) -> dict[str, Write]:
    writes = {
        "old_pending": propose(support_bot, PENDING),
        "quarantined": propose(support_bot, QUARANTINED, source_type="web_page"),
        "new_pending": propose(support_bot, "Said they switched to a standing desk"),
    }
    Write.objects.filter(pk=writes["new_pending"].pk).update(created_at=timezone.now() + timedelta(seconds=5))
    propose(support_bot, "Prefers dark mode", source_type="user_statement")  # active: not in the queue
    return writes


def test_list_answers_the_documented_shape_riskiest_then_oldest(riley, queue):
    response = riley.get(LIST)

    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    ids = [row["id"] for row in body["results"]]
    assert ids == [queue["quarantined"].pk, queue["old_pending"].pk, queue["new_pending"].pk]
    row = body["results"][0]
    assert {
        "id",
        "status",
        "principal",
        "kind",
        "statement",
        "source",
        "authority",
        "findings",
        "conflicts_with",
        "created_at",
    } <= set(row)
    assert row["status"] == "quarantined"
    assert row["principal"] == "alice"
    assert row["statement"] == QUARANTINED
    assert row["source"]["type"] == "web_page"
    assert row["authority"] == 1
    assert {"instruction"} <= {f["check"] for f in row["findings"]}
    assert row["conflicts_with"] is None


def test_list_filters_by_status(riley, queue):
    body = riley.get(LIST, {"status": "pending_review"}).json()

    assert [row["id"] for row in body["results"]] == [queue["old_pending"].pk, queue["new_pending"].pk]


def test_conflicts_with_names_the_fact_a_write_would_replace(riley, support_bot):
    old = propose(
        support_bot, "Deploys to us-east-1", source_type="user_statement", kind="profile", key="region"
    )
    new = propose(
        support_bot, "Deploys to eu-west-2", source_type="model_inference", kind="profile", key="region"
    )

    [row] = riley.get(LIST).json()["results"]

    assert (row["id"], row["conflicts_with"]) == (new.pk, old.fact_id)


def test_keyset_cursor_walks_every_write_once_in_order(riley, queue):
    seen: list[int] = []
    params: dict[str, object] = {"limit": 1}
    for _ in range(10):
        body = riley.get(LIST, params).json()
        seen.extend(row["id"] for row in body["results"])
        if body["next"] is None:
            break
        params = {"limit": 1, "cursor": body["next"]}

    assert seen == [queue["quarantined"].pk, queue["old_pending"].pk, queue["new_pending"].pk]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"status": "active"}, "status"), ({"cursor": "not-a-cursor"}, "cursor"), ({"limit": 0}, "limit")],
)
def test_bad_query_is_400_with_field_errors(riley, queue, params, field):
    response = riley.get(LIST, params)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_list_is_scoped_to_the_token_users_projects(queue, outsider, outsider_bot):
    theirs = propose(outsider_bot, PENDING)

    body = token_client(outsider).get(LIST).json()

    assert [row["id"] for row in body["results"]] == [theirs.pk]


def test_without_a_token_is_401_and_an_agent_key_is_not_a_token(client, support_bot, queue):
    assert APIClient().get(LIST).status_code == 401
    assert support_bot.client.get(LIST).status_code == 401


def test_approve_answers_200_with_the_write(riley, queue):
    write = queue["old_pending"]

    response = riley.post(decision_url(write.pk), {"action": "approve", "reason": "Confirmed"}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == write.pk
    assert body["status"] == "active"
    assert body["fact"] == {"id": write.fact_id, "status": "active"}
    assert body["decisions"][0]["reviewer"] == "riley"
    assert body["decisions"][0]["reason"] == "Confirmed"


def test_reject_answers_200_and_the_fact_is_rejected(riley, queue):
    write = queue["quarantined"]

    response = riley.post(decision_url(write.pk), {"action": "reject", "reason": "Planted"}, format="json")

    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    assert Fact.objects.get(pk=write.fact_id).status == "rejected"


def test_statement_given_is_edit_and_approve(riley, queue):
    write = queue["old_pending"]

    response = riley.post(
        decision_url(write.pk),
        {"action": "approve", "reason": "Tightened", "statement": "Hikes in the Alps"},
        format="json",
    )

    assert response.status_code == 200
    assert response.json()["decisions"][0]["statement"] == "Hikes in the Alps"
    assert Fact.objects.get(pk=write.fact_id).statement == "Hikes in the Alps"


def test_second_decision_is_409_naming_who_decided(riley, queue, second_reviewer):
    write = queue["old_pending"]
    reviews.decide(write.pk, reviews.Decision("reject", "Not a preference"), reviewer=second_reviewer)

    response = riley.post(decision_url(write.pk), {"action": "approve", "reason": "Fine"}, format="json")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert "Already decided by sam: rejected." in error["message"]
    assert ReviewDecision.objects.get(write=write).reviewer == second_reviewer


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "approve"}, "reason"),
        ({"action": "approve", "reason": "   "}, "reason"),
        ({"action": "delete", "reason": "x"}, "action"),
        ({"reason": "x"}, "action"),
        ({"action": "reject", "reason": "x", "statement": "Other"}, "statement"),
        ({"action": "approve", "reason": "x", "statement": ""}, "statement"),
    ],
)
def test_bad_decision_is_400_with_field_errors_and_changes_nothing(riley, queue, body, field):
    write = queue["old_pending"]

    response = riley.post(decision_url(write.pk), body, format="json")

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    write.refresh_from_db()
    assert write.status == "pending_review"
    assert not ReviewDecision.objects.exists()


def test_another_projects_write_is_404_and_unchanged(queue, outsider):
    write = queue["quarantined"]

    response = token_client(outsider).post(
        decision_url(write.pk), {"action": "approve", "reason": "x"}, format="json"
    )

    assert response.status_code == 404
    write.refresh_from_db()
    assert write.status == "quarantined"


def test_unknown_write_is_404(riley):
    assert (
        riley.post(decision_url(999_999), {"action": "approve", "reason": "x"}, format="json").status_code
        == 404
    )


@pytest.mark.parametrize("persona", ["auditor", "policy_editor"])
def test_roles_without_review_rights_get_403_on_decisions(queue, persona, request):
    client = token_client(request.getfixturevalue(persona))
    write = queue["old_pending"]

    assert client.get(LIST).status_code == 200
    response = client.post(decision_url(write.pk), {"action": "approve", "reason": "x"}, format="json")

    assert response.status_code == 403
    write.refresh_from_db()
    assert write.status == "pending_review"
