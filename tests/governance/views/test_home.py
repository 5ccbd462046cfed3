"""The home page: what needs attention, per project the user belongs to."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.personas import FactFactory, make_agent, make_retrieval_event

pytestmark = pytest.mark.django_db


def test_home_shows_queue_and_usage_metrics_of_my_projects_only(
    client, reviewer, support_bot, outsider_bot, django_assert_max_num_queries
):
    now = timezone.now().isoformat()
    for statement in ("Prefers tea", "Prefers email over phone"):
        support_bot.client.post(
            "/api/v1/writes",
            {
                "principal": "alice",
                "kind": "preference",
                "statement": statement,
                "source": {"type": "chat_message", "ref": "slack:1", "observed_at": now},
            },
            format="json",
        )
    FactFactory.create(project=support_bot.agent.project, authority=1, statement="A rumour")
    support_bot.client.post(
        "/api/v1/retrieve", {"principal": "alice", "query": "", "identity_verified": True}, format="json"
    )
    client.force_login(reviewer)
    with django_assert_max_num_queries(12):
        body = client.get("/").content.decode()
    assert "ACME Corp" in body and "Globex" not in body
    assert '?status=pending_review">2</a>' in body
    assert 'reason=below_authority"' in body


def test_console_requires_login_and_shows_home(client, reviewer):
    assert client.get("/").status_code == 302
    client.force_login(reviewer)
    page = client.get("/")
    assert page.status_code == 200
    assert b"ACME Corp" in page.content


def test_tokens_are_shown_per_agent_against_that_agents_own_budget(client, reviewer, project):
    small = make_agent(project, "small-bot", token_budget=200)
    large = make_agent(project, "large-bot", token_budget=1000)
    for tokens in (100, 200):
        make_retrieval_event(small.agent, tokens_used=tokens, token_budget=200)
    make_retrieval_event(large.agent, tokens_used=900, token_budget=1000)
    client.force_login(reviewer)

    body = client.get("/").content.decode()

    # Not "500 of 600" averaged over both: each agent against its own budget.
    small_row = body[body.index('data-agent="small-bot"') :]
    assert "150 of 200" in small_row[: small_row.index("</tr>")] and "(75%)" in small_row
    large_row = body[body.index('data-agent="large-bot"') :]
    assert "900 of 1000" in large_row[: large_row.index("</tr>")]
