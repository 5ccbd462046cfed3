"""GET /api/v1/admin/projects/{project}/why and the console page (issue 14 item 6)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from governance.models import Write
from governance.services import reviews
from tests.personas import AgentPersona, token_client

pytestmark = pytest.mark.django_db


def ask(auditor: Any, project: str, **query: str) -> Any:
    return token_client(auditor).get(f"/api/v1/admin/projects/{project}/why", query)


def test_each_kind_of_miss_is_attributed(
    support_bot: AgentPersona, auditor: Any, reviewer: Any, project: Any
) -> None:
    joke = support_bot.write("Alice is secretly a cat.", source="chat_message")
    reviews.decide(joke["id"], reviews.Decision("reject", "A joke, not a fact."), reviewer=reviewer)
    support_bot.write("Alice lives in Leeds.", key="city")
    retrieval = support_bot.client.post(
        "/api/v1/retrieve", {"principal": "alice", "session": "s", "identity_verified": True}, format="json"
    ).json()
    fact_id = retrieval["items"][0]["fact_id"]
    support_bot.client.post(
        f"/api/v1/retrievals/{retrieval['retrieval_id']}/feedback", {"used": []}, format="json"
    )

    never = ask(auditor, project.slug, principal="alice", phrase="Berlin").json()
    rejected = ask(auditor, project.slug, principal="alice", phrase="secretly a cat").json()
    unused = ask(auditor, project.slug, principal="alice", phrase="leeds").json()

    assert never["attributions"][0]["verdict"] == "never_stored"
    assert rejected["attributions"][0]["verdict"] == "not_in_memory"
    assert "A joke, not a fact." in rejected["attributions"][0]["explanation"]
    assert unused["attributions"] == [
        {
            "verdict": "not_used",
            "explanation": unused["attributions"][0]["explanation"],
            "fact_id": fact_id,
            "statement": "Alice lives in Leeds.",
        }
    ]
    assert Write.objects.filter(status="rejected").exists()


def test_bad_questions_are_400_and_other_projects_404(auditor: Any, project: Any, other_project: Any) -> None:
    assert ask(auditor, project.slug, principal="alice").status_code == 400
    assert ask(auditor, project.slug, principal="alice", phrase="x").status_code == 400
    assert ask(auditor, other_project.slug, principal="alice", phrase="Leeds").status_code == 404


def test_the_console_page_answers_in_plain_words(
    client: Any, auditor: Any, support_bot: AgentPersona, project: Any
) -> None:
    support_bot.write("Alice lives in <b>Leeds</b>.", key="city")
    client.force_login(auditor)

    page = client.get(
        reverse("quality:why"), {"project": project.slug, "principal": "alice", "phrase": "Leeds"}
    )

    body = page.content.decode()
    assert page.status_code == 200
    assert 'data-verdict="never_a_candidate"' in body
    assert "no agent has retrieved memory for this person" in body
    assert "&lt;b&gt;Leeds&lt;/b&gt;" in body and "<b>Leeds</b>" not in body
    assert (
        client.get(reverse("quality:why"), {"project": "nope", "principal": "a", "phrase": "bb"}).status_code
        == 400
    )
