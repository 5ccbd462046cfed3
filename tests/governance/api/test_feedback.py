"""POST /api/v1/retrievals/{id}/feedback: what the agent used, stored with the event (issue 14 item 4)."""

from __future__ import annotations

from typing import Any

import pytest

from governance.models import AuditEntry, RetrievalFeedback
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def feedback(agent: AgentPersona, retrieval_id: int, body: Any) -> Any:
    return agent.client.post(f"/api/v1/retrievals/{retrieval_id}/feedback", body, format="json")


def test_feedback_is_stored_with_its_retrieval(support_bot: AgentPersona) -> None:
    city = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]
    team = support_bot.write("I am on the billing team.", key="team")["fact"]["id"]
    retrieval_id = support_bot.retrieve()["retrieval_id"]

    response = feedback(support_bot, retrieval_id, {"used": [city], "wrong": [team]})

    assert response.status_code == 201, response.content
    assert response.json() | {"created_at": None} == {
        "retrieval_id": retrieval_id,
        "used": [city],
        "wrong": [team],
        "stale_used": [],
        "created_at": None,
    }
    stored = RetrievalFeedback.objects.get(event_id=retrieval_id)
    assert (stored.used, stored.wrong) == ([city], [team])
    assert AuditEntry.objects.filter(action="retrieval.feedback", object_id=str(retrieval_id)).exists()


def test_using_an_item_after_it_changed_counts_as_stale_adoption(support_bot: AgentPersona) -> None:
    old = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]
    retrieval_id = support_bot.retrieve()["retrieval_id"]
    support_bot.write("I moved to York.", key="city")  # supersedes the Leeds fact

    response = feedback(support_bot, retrieval_id, {"used": [old]})

    assert response.status_code == 201
    assert response.json()["stale_used"] == [old]


def test_only_items_the_retrieval_gave_can_be_named(support_bot: AgentPersona) -> None:
    support_bot.write("I live in Leeds.", key="city")
    retrieval_id = support_bot.retrieve()["retrieval_id"]
    later = support_bot.write("I am on the billing team.", key="team")["fact"]["id"]

    response = feedback(support_bot, retrieval_id, {"used": [later]})

    assert response.status_code == 400
    assert "did not give" in response.json()["error"]["fields"]["used"][0]
    assert not RetrievalFeedback.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"used": "all"},
        {"used": [0]},
        {"used": [2**63]},
        {"used": ["1; drop table"]},
        {"used": [1] * 201},
        {"used": [], "wrong": [None]},
    ],
)
def test_malformed_feedback_is_a_400_and_stores_nothing(support_bot: AgentPersona, body: Any) -> None:
    support_bot.write("I live in Leeds.", key="city")
    retrieval_id = support_bot.retrieve()["retrieval_id"]

    response = feedback(support_bot, retrieval_id, body)

    assert response.status_code == 400
    assert response.json()["error"]["code"]
    assert not RetrievalFeedback.objects.exists()


def test_feedback_is_given_once(support_bot: AgentPersona) -> None:
    city = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]
    retrieval_id = support_bot.retrieve()["retrieval_id"]
    assert feedback(support_bot, retrieval_id, {"used": [city]}).status_code == 201

    again = feedback(support_bot, retrieval_id, {"used": []})

    assert again.status_code == 409
    assert RetrievalFeedback.objects.get().used == [city]


def test_another_projects_retrieval_does_not_exist_for_the_agent(
    support_bot: AgentPersona, outsider_bot: AgentPersona
) -> None:
    city = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]
    retrieval_id = support_bot.retrieve()["retrieval_id"]

    response = feedback(outsider_bot, retrieval_id, {"used": [city]})

    assert response.status_code == 404
    assert not RetrievalFeedback.objects.exists()


def test_the_schema_describes_feedback_with_typed_bodies(client: Any) -> None:
    schema = client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/retrievals/{retrieval_id}/feedback"]["post"]
    request_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    response_ref = operation["responses"]["201"]["content"]["application/json"]["schema"]["$ref"]
    components = schema["components"]["schemas"]
    assert set(components[request_ref.rsplit("/", 1)[1]]["properties"]) == {"used", "wrong"}
    assert "stale_used" in components[response_ref.rsplit("/", 1)[1]]["properties"]
