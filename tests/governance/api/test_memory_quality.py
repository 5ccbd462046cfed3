"""Memory that stays right: echoes do not refresh stale facts, older observations do not win (R6, R9).

Each story is one the quality measurement found failing (issue: memory that
stays right, items 1 and 3), replayed through the agent API.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance.models import Fact, Supersession
from tests.helpers import candidate
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db

LEEDS = "I live in Leeds."


def reason_for(data: Any, fact_id: int) -> str | None:
    return candidate(data["retrieval_id"], fact_id).reason


@pytest.mark.parametrize(
    "echo",
    [
        {"source": "web_page", "ref": "agent:recap"},
        {"source": "model_inference", "ref": "agent:recap"},
        {"source": "user_statement", "ref": "chat:1"},  # the same source said it again
    ],
)
def test_an_echo_does_not_make_a_stale_fact_look_fresh(
    support_bot: AgentPersona, echo: dict[str, Any]
) -> None:
    fact_id = support_bot.write(LEEDS, age=timedelta(days=40))["fact"]["id"]
    before = Fact.objects.get(pk=fact_id)
    assert reason_for(support_bot.retrieve(session="s-1"), fact_id) == "stale"

    support_bot.write(LEEDS, **echo)

    after = Fact.objects.get(pk=fact_id)
    assert (after.last_verified_at, after.confidence) == (before.last_verified_at, before.confidence)
    data = support_bot.retrieve(session="s-2")
    assert "Leeds" not in data["context"]
    assert reason_for(data, fact_id) == "stale"


def test_an_echo_derived_from_a_retrieval_is_only_a_sighting(support_bot: AgentPersona) -> None:
    fact_id = support_bot.write(LEEDS, age=timedelta(days=20))["fact"]["id"]
    retrieval_id = support_bot.retrieve()["retrieval_id"]
    before = Fact.objects.get(pk=fact_id).last_verified_at

    support_bot.write(LEEDS, ref="chat:9", derived_from_retrieval=retrieval_id)

    assert Fact.objects.get(pk=fact_id).last_verified_at == before


def test_independent_evidence_still_refreshes_a_fact(support_bot: AgentPersona) -> None:
    fact_id = support_bot.write(LEEDS, age=timedelta(days=40))["fact"]["id"]

    support_bot.write(LEEDS, source="support_ticket", ref="zendesk:77")

    fact = Fact.objects.get(pk=fact_id)
    assert fact.confidence == "corroborated"
    assert timezone.now() - fact.last_verified_at < timedelta(minutes=1)
    assert (
        "- I live in Leeds. [SOURCE: chat:1 | AUTHORITY: 4 | AGE: 0 days]"
        in support_bot.retrieve()["context"]
    )


def test_an_older_observation_never_replaces_a_newer_one(config_bot: AgentPersona) -> None:
    node: dict[str, Any] = {
        "principal": None,
        "kind": "project_fact",
        "key": "ci_node_version",
        "source": "config",
    }
    newer = config_bot.write("The CI image uses Node 20.", ref="ci.yml@main", age=timedelta(hours=2), **node)
    older = config_bot.write(
        "The CI image uses Node 18.", ref="ci.yml@old-branch", age=timedelta(days=20), **node
    )

    assert older["supersedes"] == []
    assert older["fact"]["status"] == "superseded"
    current, late = Fact.objects.get(pk=newer["fact"]["id"]), Fact.objects.get(pk=older["fact"]["id"])
    assert current.status == "active"
    assert late.valid_to == current.source_observed_at
    assert Supersession.objects.filter(old_fact=late, new_fact=current).exists()
    context = config_bot.retrieve(principal=None)["context"]
    assert "Node 20" in context and "Node 18" not in context


MRI_SOURCE = (
    "Do not exceed 80 mg per day. Never schedule the MRI before March 12. "
    "The patient will book it after that."
)


def end(agent: AgentPersona, session: str, **fields: Any) -> Any:
    body = {
        "principal": "alice",
        "summary": "Discussed the medication and the MRI.",
        "resume_hint": "The patient can take the dose as needed; the MRI can be booked any time.",
        "first_event": "1",
        "last_event": "9",
        "source_text": MRI_SOURCE,
        **fields,
    }
    response = agent.client.post(f"/api/v1/sessions/{session}/end", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_hint_from_a_flagged_summary_waits_with_it(support_bot: AgentPersona, reviewer: Any) -> None:
    support_bot.retrieve(session="visit-1")
    ended = end(support_bot, "visit-1")
    assert ended["summary"]["status"] == "pending_review"
    assert any("resume hint leaves out" in f["detail"] for f in ended["summary"]["findings"])

    context = support_bot.retrieve(session="visit-2")["context"]
    assert "as needed" not in context and "Last session" not in context

    from governance.services import reviews

    reviews.decide(
        ended["summary"]["write_id"],
        reviews.Decision("approve", "Checked with the doctor"),
        reviewer=reviewer,
    )
    assert "Last session: The patient can take the dose" in support_bot.retrieve(session="visit-3")["context"]


def test_a_hint_that_drops_a_limit_is_held_without_a_summary(support_bot: AgentPersona) -> None:
    support_bot.retrieve(session="visit-1")
    ended = end(support_bot, "visit-1", summary="")
    assert ended["summary"] is None
    assert any("resume hint leaves out" in f["detail"] for f in ended["resume_hint_findings"])

    assert "Last session" not in support_bot.retrieve(session="visit-2")["context"]


def test_a_faithful_hint_is_given_out(support_bot: AgentPersona) -> None:
    support_bot.retrieve(session="visit-1")
    end(
        support_bot,
        "visit-1",
        summary="Do not exceed 80 mg per day; never schedule the MRI before March 12.",
        resume_hint="Do not exceed 80 mg per day; never schedule the MRI before March 12.",
    )
    assert (
        "Last session: Do not exceed 80 mg per day; never schedule the MRI before March 12."
        in support_bot.retrieve(session="visit-2")["context"]
    )
