"""The person's own view: plain statuses with counts, and disputing a memory (issue 14 item 8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance.models import AuditEntry, Fact, Write
from governance.services import reviews
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def dispute(agent: AgentPersona, fact_id: int, body: Any) -> Any:
    return agent.client.post(f"/api/v1/facts/{fact_id}/dispute", body, format="json")


def test_memories_carry_a_plain_status_and_counts(support_bot: AgentPersona) -> None:
    support_bot.write("I live in Leeds.", key="city")
    support_bot.write("I work nights.", key="shift", age=timedelta(days=20))
    support_bot.write("I drive a blue van.", key="vehicle", age=timedelta(days=90))

    body = support_bot.client.get("/api/v1/principals/alice/memories").json()

    by_statement = {m["statement"]: m for m in body["memories"]}
    assert by_statement["I live in Leeds."]["plain_status"] == "current"
    assert by_statement["I work nights."]["plain_status"] == "needs re-confirmation"
    assert by_statement["I drive a blue van."]["plain_status"] == "outdated"
    assert body["counts"] == {"current": 1, "needs re-confirmation": 1, "outdated": 1}
    # The contract's fields are all still there (additive).
    assert {"id", "statement", "status", "source", "tier", "age_days"} <= set(
        by_statement["I live in Leeds."]
    )


def test_a_disputed_fact_leaves_every_context_and_waits_for_a_reviewer(
    support_bot: AgentPersona, reviewer: Any
) -> None:
    fact_id = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]
    assert "Leeds" in support_bot.retrieve("s-1")["context"]

    response = dispute(support_bot, fact_id, {"principal": "alice", "reason": "I moved away years ago"})

    assert response.status_code == 200, response.content
    review_write = response.json()["review_write"]
    assert response.json() == {
        "id": fact_id,
        "status": "pending_review",
        "confidence": "disputed",
        "review_write": review_write,
    }
    # Out of a new session's block; the open session's cached block is dropped too.
    assert "Leeds" not in support_bot.retrieve("s-2")["context"]
    round_two = support_bot.client.post(
        "/api/v1/retrieve",
        {"principal": "alice", "session": "s-1", "round": 2, "identity_verified": True},
        format="json",
    ).json()
    assert "Leeds" not in round_two["context"]
    queued = Write.objects.get(pk=review_write)
    assert queued.status == "pending_review" and queued.fact_id == fact_id
    assert "I moved away years ago" in queued.findings[0]["detail"]
    assert AuditEntry.objects.filter(action="fact.disputed", object_id=str(fact_id)).exists()
    assert support_bot.client.get("/api/v1/principals/alice/memories").json()["counts"]["current"] == 0

    reviews.decide(review_write, reviews.Decision("reject", "She did move."), reviewer=reviewer)

    assert Fact.objects.get(pk=fact_id).status == "rejected"
    assert "Leeds" not in support_bot.retrieve("s-3")["context"]


def test_a_reviewer_who_upholds_the_memory_puts_it_back(support_bot: AgentPersona, reviewer: Any) -> None:
    fact_id = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]
    review_write = dispute(support_bot, fact_id, {"principal": "alice", "reason": "not true"}).json()[
        "review_write"
    ]

    reviews.decide(review_write, reviews.Decision("approve", "Confirmed on the phone."), reviewer=reviewer)

    assert Fact.objects.get(pk=fact_id).status == "active"
    assert "Leeds" in support_bot.retrieve("s-2")["context"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"principal": "alice"},
        {"reason": "wrong"},
        {"principal": "alice", "reason": ""},
        {"principal": "alice", "reason": "x" * 2001},
    ],
)
def test_a_malformed_dispute_is_a_400_and_changes_nothing(support_bot: AgentPersona, body: Any) -> None:
    fact_id = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]

    assert dispute(support_bot, fact_id, body).status_code == 400
    assert Fact.objects.get(pk=fact_id).status == "active"


def test_only_the_person_the_fact_is_about_disputes_it_once(
    support_bot: AgentPersona, outsider_bot: AgentPersona
) -> None:
    fact_id = support_bot.write("I live in Leeds.", key="city")["fact"]["id"]

    assert dispute(support_bot, fact_id, {"principal": "bob", "reason": "wrong"}).status_code == 404
    assert dispute(outsider_bot, fact_id, {"principal": "alice", "reason": "wrong"}).status_code == 404
    assert Fact.objects.get(pk=fact_id).status == "active"
    assert dispute(support_bot, fact_id, {"principal": "alice", "reason": "wrong"}).status_code == 200
    assert dispute(support_bot, fact_id, {"principal": "alice", "reason": "wrong"}).status_code == 409
