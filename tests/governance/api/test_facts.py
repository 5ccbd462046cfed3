"""Agent API facts endpoints and the withdrawal stories of issue 10 item 6 and issue 19 item 1.

GET /api/v1/facts/{id}, POST /api/v1/facts/{id}/withdraw, and what a
withdrawal means for the review decisions that follow
(POST /api/v1/admin/reviews/{id}/decision).
"""

from __future__ import annotations

from typing import Any

import pytest

from governance.models import AuditEntry, Fact, ReviewDecision, Tombstone, Write
from governance.services import reviews
from tests.governance.policy_helpers import retrieve, write
from tests.governance.review_helpers import QUARANTINED
from tests.governance.services.test_lifecycle import rows_containing
from tests.personas import AgentPersona, FactFactory, PrincipalFactory, make_agent, token_client

pytestmark = pytest.mark.django_db

STATEMENT = "Keeps a spare key under the blue flowerpot"
FRAGMENT = "spare key under the blue"
# The same assertion with a zero-width space inside: one fingerprint, but the guard holds it back.
HIDDEN = "Keeps a spare\u200b key under the blue flowerpot"


def withdraw(bot: AgentPersona, fact_id: int, **body: Any) -> Any:
    payload = {"reason": "She asked us to forget it", "principal": "alice", **body}
    payload = {k: v for k, v in payload.items() if v is not None}
    return bot.client.post(f"/api/v1/facts/{fact_id}/withdraw", payload, format="json")


def decide(client: Any, write_id: int, action: str, **extra: Any) -> Any:
    return client.post(
        f"/api/v1/admin/reviews/{write_id}/decision",
        {"action": action, "reason": "Checked with the customer", **extra},
        format="json",
    )


def queue_ids(client: Any) -> list[int]:
    response = client.get("/api/v1/admin/reviews")
    assert response.status_code == 200
    return [row["id"] for row in response.json()["results"]]


# --- issue 10 item 6: withdrawal covers every copy --------------------------------------


def test_the_pending_copy_cannot_come_back_after_the_active_one_is_withdrawn(support_bot, reviewer):
    """The reported story: S pending (tool_output), S active (user_statement), withdraw, approve, retrieve."""
    pending = write(support_bot, STATEMENT, source="tool_output", expect="pending_review")
    active = write(support_bot, STATEMENT, source="user_statement")
    assert pending["fact"]["id"] != active["fact"]["id"]
    riley = token_client(reviewer)
    assert pending["id"] in queue_ids(riley)

    assert withdraw(support_bot, active["fact"]["id"]).status_code == 200

    # The pending copy left the queue, erased, and a reviewer can no longer approve it.
    assert pending["id"] not in queue_ids(riley)
    approve = decide(riley, pending["id"], "approve")
    assert approve.status_code == 409, approve.content
    copy = Fact.objects.get(pk=pending["fact"]["id"])
    assert (copy.status, copy.statement) == ("withdrawn", "")
    assert Write.objects.get(pk=pending["id"]).statement == ""
    assert not ReviewDecision.objects.filter(write_id=pending["id"]).exists()
    context = retrieve(support_bot, session="s-1")["context"]
    assert FRAGMENT not in context.lower()
    assert rows_containing(FRAGMENT) == []


def test_a_reviewers_withdrawal_also_erases_superseded_and_rejected_copies(client, support_bot, reviewer):
    riley = token_client(reviewer)
    superseded = write(support_bot, STATEMENT, key="spare_key")
    write(support_bot, "Keeps the spare key with the neighbour", key="spare_key")
    rejected = write(support_bot, STATEMENT, source="chat_message", expect="pending_review")
    assert decide(riley, rejected["id"], "reject").status_code == 200
    # Written once more, it is held back as a re-submission; a reviewer approves it: the active copy.
    again = write(support_bot, STATEMENT, source="user_statement", expect="quarantined")
    assert decide(riley, again["id"], "approve").status_code == 200
    assert Fact.objects.get(pk=superseded["fact"]["id"]).status == "superseded"

    client.force_login(reviewer)
    response = client.post(f"/facts/{again['fact']['id']}/withdraw", {"reason": "GDPR request"})

    assert response.status_code == 302, response.content
    for created in (superseded, rejected, again):
        assert Fact.objects.get(pk=created["fact"]["id"]).status == "withdrawn"
    assert rows_containing(FRAGMENT) == []
    # Erasing the evidence of a rejected write was a person's decision, and the trail says so.
    entry = AuditEntry.objects.get(action="fact.withdrawn", object_id=str(again["fact"]["id"]))
    assert rejected["id"] in entry.data["evidence_erased"]
    assert entry.actor == "user:riley"


def test_approving_a_statement_withdrawn_since_answers_409_with_the_reason(support_bot, reviewer):
    riley = token_client(reviewer)
    first = write(support_bot, STATEMENT)
    assert withdraw(support_bot, first["fact"]["id"]).status_code == 200
    again = write(support_bot, STATEMENT.upper(), source="user_statement", expect="quarantined")

    response = decide(riley, again["id"], "approve")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "withdrawn"
    assert "asked for it to be forgotten" in error["message"]
    assert "R8" not in error["message"]
    assert Write.objects.get(pk=again["id"]).status == "quarantined"
    assert Fact.objects.get(pk=again["fact"]["id"]).status == "quarantined"
    # Rejecting stays possible.
    assert decide(riley, again["id"], "reject").status_code == 200
    assert Write.objects.get(pk=again["id"]).status == "rejected"


def test_edit_and_approve_into_a_withdrawn_statement_answers_409(support_bot, reviewer):
    riley = token_client(reviewer)
    first = write(support_bot, STATEMENT)
    assert withdraw(support_bot, first["fact"]["id"]).status_code == 200
    other = write(support_bot, "Keeps a spare key somewhere", source="chat_message", expect="pending_review")

    response = decide(riley, other["id"], "approve", statement=STATEMENT)

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "withdrawn"
    assert Fact.objects.get(pk=other["fact"]["id"]).status == "pending_review"


def test_a_withdrawal_for_one_person_does_not_block_another_persons_approval(support_bot, reviewer):
    riley = token_client(reviewer)
    first = write(support_bot, STATEMENT)
    assert withdraw(support_bot, first["fact"]["id"]).status_code == 200
    PrincipalFactory.create(project=support_bot.agent.project, external_id="bob")
    bobs = write(
        support_bot, "Keeps a spare key", principal="bob", source="chat_message", expect="pending_review"
    )

    assert decide(riley, bobs["id"], "approve", statement=STATEMENT).status_code == 200


# --- issue 19 item 1: agents may withdraw only what they should --------------------------


def test_an_agents_withdrawal_leaves_blocked_copies_for_a_reviewer(client, support_bot, reviewer):
    riley = token_client(reviewer)
    active = write(support_bot, STATEMENT)
    # Its own ref: the default is cut from the statement, and a ref may not hold the hidden character.
    hidden = write(support_bot, HIDDEN, source="user_statement", expect="quarantined", ref="chat:hidden")

    response = withdraw(support_bot, active["fact"]["id"])

    assert response.status_code == 200, response.content
    assert response.json()["tombstone"]["reason"] == "On the person's request: She asked us to forget it"
    # The evidence of the held-back write stays whole, and the reviewer is told why it cannot be approved.
    held = Write.objects.get(pk=hidden["id"])
    assert (held.status, held.statement) == ("quarantined", HIDDEN)
    assert [f["check"] for f in held.findings][: len(hidden["findings"])] == [
        f["check"] for f in hidden["findings"]
    ]
    assert held.findings[-1]["check"] == "withdrawn_since"
    assert hidden["id"] in queue_ids(riley)
    assert decide(riley, hidden["id"], "approve").status_code == 409
    assert decide(riley, hidden["id"], "reject").status_code == 200
    assert Write.objects.get(pk=hidden["id"]).statement == HIDDEN

    # Erasing it is a reviewer's decision.
    client.force_login(reviewer)
    assert client.post(f"/facts/{hidden['fact']['id']}/withdraw", {"reason": "Erase"}).status_code == 302
    assert Write.objects.get(pk=hidden["id"]).statement == ""
    assert rows_containing(FRAGMENT) == []


def test_an_agent_cannot_withdraw_another_agents_configuration(project, support_bot):
    config_bot = make_agent(project, "config-sync")
    region = FactFactory.create(
        project=project,
        principal=None,
        kind="project_fact",
        key="deployment_region",
        statement="Deployment region is eu-west-1",
        source_type="config",
        authority=5,
        agent=config_bot.agent,
        writer="agent:config-sync",
    )

    response = withdraw(support_bot, region.pk)

    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "project_fact" and "reviewer" in error["message"]
    # Naming no principal, or the fact's own agent, makes no difference.
    assert withdraw(config_bot, region.pk).status_code == 403
    region.refresh_from_db()
    assert (region.status, region.statement) == ("active", "Deployment region is eu-west-1")
    assert not Tombstone.objects.exists()


def test_an_agent_cannot_withdraw_configuration_about_a_person(project, support_bot):
    fact = FactFactory.create(
        project=project,
        principal=PrincipalFactory.create(project=project, external_id="alice"),
        statement="Alice's account tier is enterprise",
        source_type="config",
        authority=5,
    )

    response = withdraw(support_bot, fact.pk)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "configuration"
    assert Fact.objects.get(pk=fact.pk).status == "active"


def test_an_agent_cannot_withdraw_its_own_quarantined_write(support_bot, reviewer):
    held = write(support_bot, QUARANTINED, source="web_page", expect="quarantined")

    response = withdraw(support_bot, held["fact"]["id"])

    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "under_review"
    assert "only a reviewer can remove it" in error["message"]
    # The evidence is whole and still waits for a reviewer's decision.
    row = Write.objects.get(pk=held["id"])
    assert (row.status, row.statement, row.findings) == ("quarantined", QUARANTINED, held["findings"])
    assert Fact.objects.get(pk=held["fact"]["id"]).status == "quarantined"
    assert held["id"] in queue_ids(token_client(reviewer))
    assert not Tombstone.objects.exists()


def test_an_agent_cannot_withdraw_a_pending_write(support_bot):
    pending = write(support_bot, STATEMENT, source="tool_output", expect="pending_review")

    response = withdraw(support_bot, pending["fact"]["id"])

    assert response.status_code == 403
    assert Write.objects.get(pk=pending["id"]).status == "pending_review"


def test_withdraw_must_name_the_principal(support_bot):
    created = write(support_bot, STATEMENT)

    response = withdraw(support_bot, created["fact"]["id"], principal=None)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == ["principal"]
    assert "Name the person" in error["fields"]["principal"][0]
    assert Fact.objects.get(pk=created["fact"]["id"]).status == "active"


def test_naming_another_person_is_the_same_404_as_an_unknown_fact(support_bot):
    created = write(support_bot, STATEMENT)
    PrincipalFactory.create(project=support_bot.agent.project, external_id="bob")

    wrong = withdraw(support_bot, created["fact"]["id"], principal="bob")
    unknown = withdraw(support_bot, 999_999, principal="bob")

    assert wrong.status_code == unknown.status_code == 404
    assert wrong.json() == unknown.json()
    assert Fact.objects.get(pk=created["fact"]["id"]).status == "active"


def _slot(bot: AgentPersona, session: str) -> int:
    response = bot.client.post(
        "/api/v1/writes",
        {
            "principal": "alice",
            "kind": "slot",
            "key": "draft_reply",
            "statement": "Draft reply mentions the refund of 40 EUR",
            "session": session,
            "source": {"type": "user_statement", "ref": "chat:7", "observed_at": "2026-11-30T10:00:00Z"},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["status"] == "active"
    return int(response.json()["fact"]["id"])


def test_a_slot_is_visible_only_to_the_agent_of_its_session(project, support_bot):
    other_bot = make_agent(project, "billing-bot")
    slot = _slot(support_bot, "s-1")

    assert support_bot.client.get(f"/api/v1/facts/{slot}").status_code == 200
    mine = other_bot.client.get(f"/api/v1/facts/{slot}")
    unknown = other_bot.client.get("/api/v1/facts/999999")
    assert mine.status_code == unknown.status_code == 404
    assert mine.json() == unknown.json()
    # Nor can the other agent withdraw it; the agent of the session can.
    assert withdraw(other_bot, slot).status_code == 404
    assert Fact.objects.get(pk=slot).status == "active"
    assert withdraw(support_bot, slot).status_code == 200


def test_project_facts_stay_readable_by_every_agent_of_the_project(project, support_bot):
    other_bot = make_agent(project, "billing-bot")
    fact = FactFactory.create(
        project=project, principal=None, kind="project_fact", statement="Office closes at 6pm"
    )

    assert other_bot.client.get(f"/api/v1/facts/{fact.pk}").status_code == 200


def test_the_openapi_schema_documents_the_required_principal(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    operation = schema["paths"]["/api/v1/facts/{fact_id}/withdraw"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(body["required"]) == {"reason", "principal"}
    assert "required" in body["properties"]["principal"]["description"].lower()
    assert {"400", "403", "404", "409"} <= set(operation["responses"])


def test_review_service_refuses_the_approval_without_recording_a_decision(support_bot, reviewer):
    first = write(support_bot, STATEMENT)
    assert withdraw(support_bot, first["fact"]["id"]).status_code == 200
    again = write(support_bot, STATEMENT, source="user_statement", expect="quarantined")

    with pytest.raises(reviews.Tombstoned):
        reviews.decide(again["id"], reviews.Decision("approve", "fine"), reviewer=reviewer)

    assert not ReviewDecision.objects.filter(write_id=again["id"]).exists()


def test_a_reviewer_erases_a_rejected_write_an_agents_withdrawal_kept(client, support_bot, reviewer):
    active = write(support_bot, STATEMENT)
    # Asked for more authority than a chat message may have: turned away, no fact, kept as evidence.
    response = support_bot.client.post(
        "/api/v1/writes",
        {
            "principal": "alice",
            "kind": "preference",
            "statement": STATEMENT,
            "authority": 5,
            "source": {"type": "chat_message", "ref": "chat:9", "observed_at": "2026-11-30T10:00:00Z"},
        },
        format="json",
    )
    assert response.json()["status"] == "rejected" and response.json()["fact"] is None
    blocked = response.json()["id"]
    assert withdraw(support_bot, active["fact"]["id"]).status_code == 200
    assert Write.objects.get(pk=blocked).statement == STATEMENT
    # The agent cannot finish the job; the fact page offers it to a reviewer.
    assert withdraw(support_bot, active["fact"]["id"]).status_code == 409
    client.force_login(reviewer)
    page = client.get(f"/facts/{active['fact']['id']}/").content.decode()
    assert "data-kept-for-review" in page and f"W-{blocked}" in page

    erased = client.post(f"/facts/{active['fact']['id']}/withdraw", {"reason": "Erase the evidence too"})

    assert erased.status_code == 302
    assert Write.objects.get(pk=blocked).statement == ""
    assert rows_containing(FRAGMENT) == []
    entry = AuditEntry.objects.get(action="fact.evidence_erased", object_id=str(active["fact"]["id"]))
    assert entry.actor == "user:riley" and blocked in entry.data["writes_erased"]
    assert "data-kept-for-review" not in client.get(f"/facts/{active['fact']['id']}/").content.decode()
    # Nothing is left to erase: a second try is refused.
    assert client.post(f"/facts/{active['fact']['id']}/withdraw", {"reason": "again"}).status_code == 409


# --- issue 20: a reviewer cannot approve a rewording of a withdrawn statement --------


HOME = "I live at 12 Elm Street, Springfield."
REWORDED = "The user mentioned their home is 12 Elm Street in Springfield."


def test_approving_a_rewording_that_carries_a_withdrawn_address_is_refused(support_bot, reviewer):
    # Waits for review (a tool's output), then the person has the original forgotten.
    pending = write(support_bot, REWORDED, source="tool_output", expect="pending_review")
    home = write(support_bot, HOME)
    assert withdraw(support_bot, home["fact"]["id"]).status_code == 200
    riley = token_client(reviewer)

    refused = decide(riley, pending["id"], "approve")

    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "withdrawn"
    assert "same street address" in error["message"] and "forgotten" in error["message"]
    assert "Elm" not in error["message"] and "R8" not in error["message"]
    assert not ReviewDecision.objects.filter(write_id=pending["id"]).exists()
    assert Fact.objects.get(pk=pending["fact"]["id"]).status == "pending_review"
    # Rejecting it is still possible.
    assert decide(riley, pending["id"], "reject").status_code == 200


def test_editing_a_held_write_into_a_rewording_of_a_withdrawn_address_is_refused(support_bot, reviewer):
    home = write(support_bot, HOME)
    assert withdraw(support_bot, home["fact"]["id"]).status_code == 200
    pending = write(
        support_bot, "The user likes quiet streets.", source="tool_output", expect="pending_review"
    )

    refused = decide(token_client(reviewer), pending["id"], "approve", statement=REWORDED)

    assert refused.status_code == 409, refused.content
    assert Write.objects.get(pk=pending["id"]).status == "pending_review"


def test_a_different_address_in_the_same_town_is_still_approved(support_bot, reviewer):
    home = write(support_bot, HOME)
    assert withdraw(support_bot, home["fact"]["id"]).status_code == 200
    pending = write(
        support_bot,
        "The user's office is at 40 Oak Road, Springfield.",
        source="tool_output",
        expect="pending_review",
    )

    assert decide(token_client(reviewer), pending["id"], "approve").status_code == 200
