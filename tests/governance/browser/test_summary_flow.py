"""A reviewer opens a flagged summary from the review queue and sees what it dropped, marked (issue 7)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from governance.context import actor_scope
from governance.models import Project
from governance.services.sessions import EndRequest, end_session
from tests.personas import PASSWORD, AgentPersona, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SOURCE = "Running late for a meeting with the VP of Engineering. Please never call after 6pm."
SUMMARY = "User is late for a meeting."


def test_reviewer_sees_the_dropped_items_of_a_flagged_summary_highlighted(
    page: Page, live_server: Any, project: Project, support_bot: AgentPersona
) -> None:
    make_user("riley", "reviewer", project)
    with actor_scope("agent:support-bot"):
        ended = end_session(
            support_bot.agent,
            "s-42",
            EndRequest(
                principal="alice",
                summary=SUMMARY,
                resume_hint="Ask how the meeting went.",
                first_event="msg-1",
                last_event="msg-12",
                source_text=SOURCE,
            ),
        )
    assert ended.write is not None and ended.write.status == "pending_review"

    page.goto(f"{live_server.url}/login/?next=/reviews/")
    page.fill("#id_username", "riley")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()

    # In the queue, the summary's item marks what the summary lost, in the source text.
    item = page.locator(f"#write-{ended.write.pk}")
    expect(item.locator("[data-statement]")).to_have_text(SUMMARY)
    marks = item.locator("[data-summary-diff] [data-source] mark")
    expect(marks).to_have_text(["VP of Engineering", "never call after 6pm"])
    expect(item.locator("[data-summary-diff] [data-source]")).to_have_text(SOURCE)

    # Opening the summary's session shows the same diff, with the rounds and the hint around it.
    item.locator("[data-session-link]").click()
    expect(page.get_by_role("heading", name="Summary", exact=True, level=2)).to_be_visible()
    expect(page.locator("#summary [data-source] mark")).to_have_text(
        ["VP of Engineering", "never call after 6pm"]
    )
    expect(page.locator("#summary [data-dropped] li")).to_have_text(
        ["title VP of Engineering", "prohibition never call after 6pm"]
    )
    expect(page.locator("[data-resume-hint]")).to_have_text("Ask how the meeting went.")
