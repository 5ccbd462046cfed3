"""Session ends that stay right: a tagged resume hint, and a summary check without noise (R10, R17).

Issue "Memory that stays right", item 4 (the hint carries a source tag like
every other item) and the summary check's noise ("name: St", "name: I'm",
"number: twice"), replayed through the agent API.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def end(agent: AgentPersona, session: str, **fields: Any) -> Any:
    body = {"principal": "alice", "first_event": "1", "last_event": "9", **fields}
    response = agent.client.post(f"/api/v1/sessions/{session}/end", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_an_injected_resume_hint_carries_a_source_tag(support_bot: AgentPersona) -> None:
    support_bot.retrieve("visit-1")
    end(
        support_bot,
        "visit-1",
        summary="Compared two laptop models.",
        resume_hint="Was comparing two laptop models.",
        source_text="We compared two laptop models.",
    )

    context = support_bot.retrieve("visit-2")["context"]
    assert (
        "Last session: Was comparing two laptop models. "
        "[SOURCE: session:visit-1#1..9 | AUTHORITY: 2 | AGE: 0 days]"
    ) in context.split("\n")


def test_a_hint_without_a_summary_names_its_session(support_bot: AgentPersona) -> None:
    support_bot.retrieve("visit-1")
    end(support_bot, "visit-1", summary="", resume_hint="Was comparing two laptop models.")

    context = support_bot.retrieve("visit-2")["context"]
    assert (
        "Last session: Was comparing two laptop models. "
        "[SOURCE: session:visit-1 | AUTHORITY: 2 | AGE: 0 days]"
    ) in context.split("\n")


def test_a_faithful_summary_is_not_held_for_noise(support_bot: AgentPersona) -> None:
    support_bot.retrieve("visit-1")
    ended = end(
        support_bot,
        "visit-1",
        summary="Alice will meet Bob at St Pancras station at 10:30.",
        resume_hint="Meeting Bob at St Pancras at 10:30.",
        source_text=(
            "I'm meeting Bob at St Pancras station at 10:30. I've told him twice. "
            "St. Pancras is busy, so I'm going early."
        ),
    )

    assert ended["summary"]["status"] == "active", ended["summary"]["findings"]
    assert ended["resume_hint_findings"] == []


def test_a_summary_that_drops_a_real_name_is_still_held(support_bot: AgentPersona) -> None:
    support_bot.retrieve("visit-1")
    ended = end(
        support_bot,
        "visit-1",
        summary="Alice will meet someone at the station.",
        resume_hint="",
        source_text="I'm meeting Bob Okafor at St Pancras station.",
    )

    assert ended["summary"]["status"] == "pending_review"
    details = " ".join(f["detail"] for f in ended["summary"]["findings"])
    assert "Bob Okafor" in details and "I'm" not in details
