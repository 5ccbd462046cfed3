"""POST /api/v1/retrieve on the situations the design describes (issue 4's must-shows)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.context import actor_scope
from governance.models import Fact, RetrievalEvent
from governance.rules.rendering import CONFIRM_LINE, PRIORITY, RESUME_LINE
from governance.rules.tokens import count_tokens
from governance.services import reviews
from tests.personas import FactFactory, PrincipalFactory, make_agent, make_user

pytestmark = pytest.mark.django_db


def write(
    agent,
    *,
    principal="alice",
    kind="profile",
    key=None,
    statement,
    source="user_statement",
    ref="chat:1",
    days_ago=0,
    **extra,
):
    observed = timezone.now() - timedelta(days=days_ago)
    data = {
        "principal": principal,
        "kind": kind,
        "key": key,
        "statement": statement,
        "source": {"type": source, "ref": ref, "observed_at": observed.isoformat()},
        **extra,
    }
    response = agent.client.post("/api/v1/writes", data, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def retrieve(agent, *, principal="alice", session="s-1", query="", round=1, identity_verified=True):
    response = agent.client.post(
        "/api/v1/retrieve",
        {
            "principal": principal,
            "session": session,
            "query": query,
            "round": round,
            "identity_verified": identity_verified,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def reasons(retrieval_id):
    return {c.fact_id: c.reason for c in RetrievalEvent.objects.get(pk=retrieval_id).candidates}


def test_region_change_injects_only_the_new_region(support_bot):
    old = write(support_bot, key="deployment_region", statement="Deploys to us-east-1", ref="chat:1")
    new = write(support_bot, key="deployment_region", statement="Deploys to eu-west-2", ref="chat:2")
    data = retrieve(support_bot)
    assert data["context"] == "\n".join(
        [
            PRIORITY,
            RESUME_LINE,
            "About the user:",
            "- Deploys to eu-west-2 [SOURCE: chat:2 | AUTHORITY: 4 | AGE: 0 days]",
        ]
    )
    assert "us-east-1" not in data["context"]
    assert reasons(data["retrieval_id"])[old["fact"]["id"]] == "superseded"
    assert [item["fact_id"] for item in data["items"]] == [new["fact"]["id"]]
    event = support_bot.client.get(f"/api/v1/retrievals/{data['retrieval_id']}").json()
    by_fact = {c["fact_id"]: c for c in event["candidates"]}
    assert by_fact[old["fact"]["id"]]["decision"] == "excluded"
    assert by_fact[old["fact"]["id"]]["reason"] == "superseded"


def test_python_upgrade_by_config_injects_only_3_13_and_keeps_history(support_bot, config_bot):
    old = write(
        support_bot,
        principal=None,
        kind="project_fact",
        key="python_version",
        statement="The service runs on Python 3.11",
        source="documentation",
        ref="docs/setup.md",
    )
    write(
        config_bot,
        principal=None,
        kind="project_fact",
        key="python_version",
        statement="The service runs on Python 3.13",
        source="config",
        ref="pyproject.toml",
    )
    data = retrieve(support_bot)
    assert (
        "- The service runs on Python 3.13 [SOURCE: pyproject.toml | AUTHORITY: 5 | AGE: 0 days]"
        in data["context"]
    )
    assert "3.11" not in data["context"]
    assert Fact.objects.get(pk=old["fact"]["id"]).status == "superseded"
    assert reasons(data["retrieval_id"])[old["fact"]["id"]] == "superseded"


def test_slack_joke_is_excluded_below_authority(support_bot, project):
    joke = write(
        support_bot,
        principal=None,
        kind="project_fact",
        statement="Our CTO is a professional cat herder",
        source="chat_message",
        ref="slack:#random/171",
    )
    assert joke["status"] == "pending_review"
    reviewer = make_user("rev", "reviewer", project)
    with actor_scope("user:rev", user=reviewer):
        reviews.decide(
            joke["id"],
            reviews.Decision("approve", "It was said; the floor will keep it out"),
            reviewer=reviewer,
        )
    data = retrieve(support_bot)
    assert "cat herder" not in data["context"]
    assert reasons(data["retrieval_id"])[joke["fact"]["id"]] == "below_authority"


def test_other_principals_and_projects_are_never_candidates(support_bot, outsider_bot, project):
    mine = write(support_bot, kind="preference", statement="Prefers answers in French")
    other_person = FactFactory.create(
        project=project,
        principal=PrincipalFactory(project=project, external_id="bob"),
        statement="Prefers answers in French",
    )
    other_project = write(outsider_bot, kind="preference", statement="Prefers answers in French")
    data = retrieve(support_bot, query="Prefers answers in French")
    fact_ids = set(reasons(data["retrieval_id"]))
    assert mine["fact"]["id"] in fact_ids
    assert other_person.pk not in fact_ids
    assert other_project["fact"]["id"] not in fact_ids


def test_stale_fact_is_excluded_and_20_day_fact_asks_to_reconfirm(support_bot):
    stale = write(
        support_bot, kind="preference", statement="Likes window seats", ref="chat:old", days_ago=200
    )
    write(support_bot, kind="preference", statement="Uses a screen reader", ref="chat:20", days_ago=20)
    data = retrieve(support_bot)
    # The newest verification is 20 days old, so the session mode is confirm (R9).
    assert data["mode"] == "confirm"
    assert data["context"] == "\n".join(
        [
            PRIORITY,
            CONFIRM_LINE,
            "About the user:",
            "- Previously mentioned (please re-confirm): Uses a screen reader "
            "[SOURCE: chat:20 | AUTHORITY: 4 | AGE: 20 days]",
        ]
    )
    assert reasons(data["retrieval_id"])[stale["fact"]["id"]] == "stale"


def test_unverified_identity_gets_no_principal_memory(support_bot):
    fact = write(support_bot, kind="preference", statement="Prefers dark mode")
    data = retrieve(support_bot, identity_verified=False)
    assert "dark mode" not in data["context"]
    assert data["items"] == []
    assert reasons(data["retrieval_id"])[fact["fact"]["id"]] == "identity_unverified"


def test_sixty_eligible_facts_fit_a_300_token_budget(project):
    bot = make_agent(project, "tight-bot", token_budget=300)
    principal = PrincipalFactory(project=project, external_id="alice")
    for n in range(60):
        FactFactory.create(
            project=project,
            principal=principal,
            kind="preference",
            statement=f"Preference number {n}: likes option {n} for the weekly report layout",
        )
    data = retrieve(bot)
    assert data["token_budget"] == 300
    assert data["tokens_used"] <= 300
    assert data["tokens_used"] == count_tokens(data["context"], "o200k_base")
    decided = reasons(data["retrieval_id"])
    selected = [fid for fid, reason in decided.items() if reason is None]
    over = [fid for fid, reason in decided.items() if reason == "over_budget"]
    assert len(selected) == len(data["items"]) > 0
    assert len(selected) + len(over) == 60
    assert data["excluded"] == len(over) and data["candidates"] == 60


def test_round_two_returns_the_session_start_text_byte_identical(support_bot):
    write(support_bot, kind="preference", statement="Prefers dark mode")
    first = retrieve(support_bot, session="s-9", round=1)
    write(support_bot, kind="preference", statement="Prefers metric units")  # arrives mid-session
    second = retrieve(support_bot, session="s-9", round=2)
    assert second["context"].encode() == first["context"].encode()
    event = RetrievalEvent.objects.get(pk=second["retrieval_id"])
    assert event.static_block_cached is True


def test_policy_version_is_reported(support_bot):
    assert retrieve(support_bot)["policy_version"] == 1


def test_unknown_retrieval_of_another_project_is_404(support_bot, outsider_bot):
    data = retrieve(support_bot)
    assert outsider_bot.client.get(f"/api/v1/retrievals/{data['retrieval_id']}").status_code == 404


def test_bad_retrieve_input_is_400(support_bot):
    response = support_bot.client.post("/api/v1/retrieve", {"principal": "a", "round": 0}, format="json")
    assert response.status_code == 400
    assert "round" in response.json()["error"]["fields"]
    assert RetrievalEvent.objects.count() == 0


def test_fact_endpoint_shows_the_chain_both_ways(support_bot):
    old = write(support_bot, key="deployment_region", statement="Deploys to us-east-1", ref="chat:1")
    new = write(support_bot, key="deployment_region", statement="Deploys to eu-west-2", ref="chat:2")
    old_body = support_bot.client.get(f"/api/v1/facts/{old['fact']['id']}").json()
    new_body = support_bot.client.get(f"/api/v1/facts/{new['fact']['id']}").json()
    assert old_body["status"] == "superseded"
    assert old_body["superseded_by"] == [new["fact"]["id"]] and old_body["supersedes"] == []
    assert new_body["supersedes"] == [old["fact"]["id"]] and new_body["superseded_by"] == []
    assert old_body["source"] == {
        "type": "user_statement",
        "ref": "chat:1",
        "observed_at": old_body["source"]["observed_at"],
        "writer": "agent:support-bot",
    }
