"""POST /api/v1/retrieve on the situations the design describes (issue 4's must-shows)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.context import actor_scope
from governance.models import Fact, RetrievalEvent
from governance.rules.rendering import CONFIRM_LINE, PRIORITY, RESUME_LINE
from governance.rules.tokens import count_tokens
from governance.services import reviews
from tests.personas import FactFactory, PrincipalFactory, make_agent, make_user

pytestmark = pytest.mark.django_db


def reasons(retrieval_id):
    return {c.fact_id: c.reason for c in RetrievalEvent.objects.get(pk=retrieval_id).candidates}


def test_region_change_injects_only_the_new_region(support_bot):
    old = support_bot.write(key="deployment_region", statement="Deploys to us-east-1", ref="chat:1")
    new = support_bot.write(key="deployment_region", statement="Deploys to eu-west-2", ref="chat:2")
    data = support_bot.retrieve()
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
    old = support_bot.write(
        principal=None,
        kind="project_fact",
        key="python_version",
        statement="The service runs on Python 3.11",
        source="documentation",
        ref="docs/setup.md",
    )
    config_bot.write(
        principal=None,
        kind="project_fact",
        key="python_version",
        statement="The service runs on Python 3.13",
        source="config",
        ref="pyproject.toml",
    )
    data = support_bot.retrieve()
    assert (
        "- The service runs on Python 3.13 [SOURCE: pyproject.toml | AUTHORITY: 5 | AGE: 0 days]"
        in data["context"]
    )
    assert "3.11" not in data["context"]
    assert Fact.objects.get(pk=old["fact"]["id"]).status == "superseded"
    assert reasons(data["retrieval_id"])[old["fact"]["id"]] == "superseded"


def test_slack_joke_is_excluded_below_authority(support_bot, project):
    joke = support_bot.write(
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
    data = support_bot.retrieve()
    assert "cat herder" not in data["context"]
    assert reasons(data["retrieval_id"])[joke["fact"]["id"]] == "below_authority"


def test_other_principals_and_projects_are_never_candidates(support_bot, outsider_bot, project):
    mine = support_bot.write(kind="preference", statement="Prefers answers in French")
    other_person = FactFactory.create(
        project=project,
        principal=PrincipalFactory(project=project, external_id="bob"),
        statement="Prefers answers in French",
    )
    other_project = outsider_bot.write(kind="preference", statement="Prefers answers in French")
    data = support_bot.retrieve(query="Prefers answers in French")
    fact_ids = set(reasons(data["retrieval_id"]))
    assert mine["fact"]["id"] in fact_ids
    assert other_person.pk not in fact_ids
    assert other_project["fact"]["id"] not in fact_ids


def test_stale_fact_is_excluded_and_20_day_fact_asks_to_reconfirm(support_bot):
    stale = support_bot.write(
        kind="preference", statement="Likes window seats", ref="chat:old", age=timedelta(days=200)
    )
    support_bot.write(
        kind="preference", statement="Uses a screen reader", ref="chat:20", age=timedelta(days=20)
    )
    data = support_bot.retrieve()
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
    fact = support_bot.write(kind="preference", statement="Prefers dark mode")
    data = support_bot.retrieve(identity_verified=False)
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
    data = bot.retrieve()
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
    support_bot.write(kind="preference", statement="Prefers dark mode")
    first = support_bot.retrieve(session="s-9", round=1)
    support_bot.write(kind="preference", statement="Prefers metric units")  # arrives mid-session
    second = support_bot.retrieve(session="s-9", round=2)
    assert second["context"].encode() == first["context"].encode()
    event = RetrievalEvent.objects.get(pk=second["retrieval_id"])
    assert event.static_block_cached is True


def test_policy_version_is_reported(support_bot):
    assert support_bot.retrieve()["policy_version"] == 1


def test_unknown_retrieval_of_another_project_is_404(support_bot, outsider_bot):
    data = support_bot.retrieve()
    assert outsider_bot.client.get(f"/api/v1/retrievals/{data['retrieval_id']}").status_code == 404


def test_bad_retrieve_input_is_400(support_bot):
    response = support_bot.client.post("/api/v1/retrieve", {"principal": "a", "round": 0}, format="json")
    assert response.status_code == 400
    assert "round" in response.json()["error"]["fields"]
    assert RetrievalEvent.objects.count() == 0


def test_fact_endpoint_shows_the_chain_both_ways(support_bot):
    old = support_bot.write(key="deployment_region", statement="Deploys to us-east-1", ref="chat:1")
    new = support_bot.write(key="deployment_region", statement="Deploys to eu-west-2", ref="chat:2")
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


def test_a_retrieval_costs_a_fixed_number_of_queries(support_bot, django_assert_num_queries):
    # Round 1 of a session, 7: the agent key, the request's savepoint, one read
    # of the principal with R9's input, the reviewers' rulings on possible
    # conflicts, the project's facts generation, the session (locked; none
    # yet) and the principal's ended sessions (R9's resume hint); the
    # project's facts (first retrieval of this generation in the process
    # only); the candidates, with the session's INSERT .. ON CONFLICT
    # carrying its mode in front of them (which locks the row it inserts);
    # one statement for the event with the start block (an upsert) and the
    # principal's last-seen time; and the savepoint's release (the test runs
    # inside a transaction). A later round, 5: the header reads the session
    # locked, the cached start block with its facts, which replace planning
    # it, and the round's own candidates; the project's facts come from the
    # process, and last-seen is fresh enough to leave alone. The first round
    # of another session, 6 (docs/performance.md, "Statements per retrieval").
    for n in range(3):
        support_bot.write(f"Prefers tea number {n}", kind="preference")
    for n in range(3):
        support_bot.write(f"Lives in city {n}", key="home_city")
    with django_assert_num_queries(7):
        support_bot.retrieve("s-1", round=1, query="tea")
    with django_assert_num_queries(5):
        support_bot.retrieve("s-1", round=2, query="tea")
    with django_assert_num_queries(6):
        support_bot.retrieve("s-2", round=1, query="tea")
    # A first round naming a session that exists: the header found it and
    # locked it, so nothing is inserted, and the read takes its slots.
    with django_assert_num_queries(6):
        support_bot.retrieve("s-2", round=1, query="tea")
