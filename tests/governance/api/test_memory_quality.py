"""Memory that stays right: echoes do not refresh stale facts, older observations do not win (R6, R9).

Each story is one the quality measurement found failing (issue: memory that
stays right, items 1 and 3), replayed through the agent API.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance.models import Fact, RetrievalCandidate, Supersession
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db

LEEDS = "I live in Leeds."


def write(agent: AgentPersona, statement: str, **fields: Any) -> Any:
    observed = timezone.now() - fields.pop("age", timedelta(0))
    body = {
        "principal": fields.pop("principal", "alice"),
        "kind": fields.pop("kind", "profile"),
        "statement": statement,
        "source": {
            "type": fields.pop("source", "user_statement"),
            "ref": fields.pop("ref", "chat:1"),
            "observed_at": observed.isoformat(),
        },
        **fields,
    }
    response = agent.client.post("/api/v1/writes", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def retrieve(agent: AgentPersona, principal: str | None = "alice", session: str = "s-1") -> Any:
    response = agent.client.post(
        "/api/v1/retrieve",
        {"principal": principal, "session": session, "round": 1, "identity_verified": True},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def reason_for(data: Any, fact_id: int) -> str | None:
    return RetrievalCandidate.objects.get(event_id=data["retrieval_id"], fact_id=fact_id).reason


@pytest.mark.parametrize(
    "echo",
    [
        {"source": "web_page", "ref": "agent:recap"},
        {"source": "model_inference", "ref": "agent:recap"},
        {"source": "user_statement", "ref": "chat:1"},  # the same source said it again
    ],
)
def test_an_echo_does_not_make_a_stale_fact_look_fresh(
    support_bot: AgentPersona, echo: dict[str, str]
) -> None:
    fact_id = write(support_bot, LEEDS, age=timedelta(days=40))["fact"]["id"]
    before = Fact.objects.get(pk=fact_id)
    assert reason_for(retrieve(support_bot, session="s-1"), fact_id) == "stale"

    write(support_bot, LEEDS, **echo)

    after = Fact.objects.get(pk=fact_id)
    assert (after.last_verified_at, after.confidence) == (before.last_verified_at, before.confidence)
    data = retrieve(support_bot, session="s-2")
    assert "Leeds" not in data["context"]
    assert reason_for(data, fact_id) == "stale"


def test_an_echo_derived_from_a_retrieval_is_only_a_sighting(support_bot: AgentPersona) -> None:
    fact_id = write(support_bot, LEEDS, age=timedelta(days=20))["fact"]["id"]
    retrieval_id = retrieve(support_bot)["retrieval_id"]
    before = Fact.objects.get(pk=fact_id).last_verified_at

    write(support_bot, LEEDS, ref="chat:9", derived_from_retrieval=retrieval_id)

    assert Fact.objects.get(pk=fact_id).last_verified_at == before


def test_independent_evidence_still_refreshes_a_fact(support_bot: AgentPersona) -> None:
    fact_id = write(support_bot, LEEDS, age=timedelta(days=40))["fact"]["id"]

    write(support_bot, LEEDS, source="support_ticket", ref="zendesk:77")

    fact = Fact.objects.get(pk=fact_id)
    assert fact.confidence == "corroborated"
    assert timezone.now() - fact.last_verified_at < timedelta(minutes=1)
    assert (
        "- I live in Leeds. [SOURCE: chat:1 | AUTHORITY: 4 | AGE: 0 days]" in retrieve(support_bot)["context"]
    )


def test_an_older_observation_never_replaces_a_newer_one(config_bot: AgentPersona) -> None:
    node = {"principal": None, "kind": "project_fact", "key": "ci_node_version", "source": "config"}
    newer = write(config_bot, "The CI image uses Node 20.", ref="ci.yml@main", age=timedelta(hours=2), **node)
    older = write(
        config_bot, "The CI image uses Node 18.", ref="ci.yml@old-branch", age=timedelta(days=20), **node
    )

    assert older["supersedes"] == []
    assert older["fact"]["status"] == "superseded"
    current, late = Fact.objects.get(pk=newer["fact"]["id"]), Fact.objects.get(pk=older["fact"]["id"])
    assert current.status == "active"
    assert late.valid_to == current.source_observed_at
    assert Supersession.objects.filter(old_fact=late, new_fact=current).exists()
    context = retrieve(config_bot, principal=None)["context"]
    assert "Node 20" in context and "Node 18" not in context
