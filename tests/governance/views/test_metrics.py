"""The live metrics dashboard and an agent's seven questions: who may see them, and what they say."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from governance.context import actor_scope
from governance.services import policies, retrievals
from tests.personas import make_retrieval_event, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def traffic(support_bot: Any) -> Any:
    for tokens in (120, 480, 600):
        make_retrieval_event(support_bot.agent, tokens_used=tokens, token_budget=600)
    return support_bot


@pytest.mark.parametrize("role", ["auditor", "policy_editor", "admin"])
def test_watchers_of_the_project_see_its_live_metrics(client: Any, project: Any, traffic: Any, role: str):
    client.force_login(make_user(f"someone-{role}", role, project))

    index = client.get(reverse("quality:live_index")).content.decode()
    page = client.get(reverse("quality:live", args=[project.slug]))
    agent_page = client.get(reverse("quality:live_agent", args=[project.slug, "support-bot"]))
    questions = client.get(reverse("policies:questions", args=[project.slug, "support-bot"]))

    assert reverse("quality:live", args=[project.slug]) in index
    assert page.status_code == agent_page.status_code == questions.status_code == 200
    text = page.content.decode()
    assert "3 retrievals in the last 30 days" in text
    assert 'data-agent="support-bot" data-budget="600"' in text
    assert "support-bot: 3 retrievals; 1 used 90% or more of the budget" in text
    assert reverse("policies:questions", args=[project.slug, "support-bot"]) in agent_page.content.decode()


def test_a_reviewer_is_refused_and_an_outsider_sees_nothing(
    client: Any, project: Any, traffic: Any, reviewer: Any, outsider: Any
):
    urls = [
        reverse("quality:live", args=[project.slug]),
        reverse("quality:live_agent", args=[project.slug, "support-bot"]),
        reverse("policies:questions", args=[project.slug, "support-bot"]),
    ]
    client.force_login(reviewer)
    assert [client.get(url).status_code for url in urls] == [403, 403, 403]
    assert project.slug not in client.get(reverse("quality:live_index")).content.decode().split("<main")[-1]
    client.force_login(outsider)
    assert [client.get(url).status_code for url in urls] == [404, 404, 404]


def test_an_unknown_agent_is_a_404(client: Any, project: Any, auditor: Any):
    client.force_login(auditor)
    assert client.get(reverse("quality:live_agent", args=[project.slug, "nobody"])).status_code == 404


def test_the_seven_questions_mark_what_the_policy_leaves_open(client: Any, project: Any, support_bot: Any):
    # Turning identity verification off widens what is given: only an administrator may.
    admin = make_user("ada", "admin", project)
    with actor_scope("test"):
        policies.save_draft(
            support_bot.agent, {"require_identity_verification": False, "token_budget": 900}, user=admin
        )
        policies.publish_draft(support_bot.agent, "Testing the questions page", user=admin)
        for session in ("s1", "s2"):
            for round_ in (1, 2):
                retrievals.retrieve(
                    support_bot.agent,
                    retrievals.RetrieveRequest(
                        principal="bob", session=session, query="", round=round_, identity_verified=False
                    ),
                )
    client.force_login(admin)

    page = client.get(reverse("policies:questions", args=[project.slug, "support-bot"])).content.decode()

    # Identity off (signal, guardrails), default weights (ranking), default session windows (state),
    # no feedback (observability): budget was sized (900), kinds are allowed.
    assert 'id="question-1" data-open="no"' in page
    assert 'id="question-2" data-open="yes"' in page
    assert 'id="question-4" data-open="no"' in page
    assert 'id="question-5" data-open="yes"' in page
    assert 'id="question-7" data-open="yes"' in page
    assert "5 of 7 left open" in page
    assert "nothing guards against giving one person" in page
    assert "short or name-like id" in page  # "bob"
    assert "Later rounds that reused the session-start block byte for byte</dt><dd>2 of 2 (100%)" in page
    assert "Retrievals with the agent&#x27;s feedback</dt><dd>0 of 4 (0%)" in page
