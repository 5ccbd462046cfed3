"""A reviewer settles a possible conflict in Chromium; a policy editor reads the relevance trade-off."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from governance.models import Fact
from tests.personas import PASSWORD, AgentPersona

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set to a folder to keep screenshots of the pages at desktop and phone widths.
SHOTS = os.environ.get("CONFLICT_SHOTS") or os.environ.get("SCREENSHOT_DIR")


def shoot(page: Page, name: str) -> None:
    if SHOTS:
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 900})


def login(page: Page, live_server: Any, user: Any, next_url: str) -> None:
    page.goto(f"{live_server.url}/login/?next={next_url}")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")


def write(agent: AgentPersona, statement: str, *, days_ago: float = 0) -> Any:
    observed = timezone.now() - timedelta(days=days_ago)
    body = {
        "principal": "alice",
        "kind": "profile",
        "statement": statement,
        "source": {"type": "user_statement", "ref": "chat:1", "observed_at": observed.isoformat()},
    }
    response = agent.client.post("/api/v1/writes", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_reviewer_keeps_both_sides_of_a_possible_conflict(page: Page, live_server, reviewer, support_bot):
    leeds = write(support_bot, "I live in Leeds.", days_ago=3)
    york = write(support_bot, "I think I live in York now, mostly.")

    login(page, live_server, reviewer, "/reviews/")
    item = page.locator("article.review-item").filter(has_text="York")
    expect(item.locator("h3").filter(has_text="May contradict an older fact")).to_be_visible()
    expect(item.locator(".diff-old")).to_contain_text("I live in Leeds.")
    # Both are facts already: nothing is "proposed"; the card says which is which.
    expect(item.locator("h3").filter(has_text="Newer statement")).to_be_visible()
    expect(item.locator("h3").filter(has_text="Proposed statement")).to_have_count(0)
    expect(item.locator(".diff-old h4")).to_contain_text("Older · Fact #")
    expect(item.locator(".diff-new")).to_contain_text("York")
    expect(item).to_contain_text("May contradict a current fact")
    expect(item).not_to_contain_text("possible_conflict")
    shoot(page, "conflict-review")

    item.locator("textarea[name=reason]").fill("Asked Alice: she lives in both places")
    item.locator("button[data-action=keep_both]").click()
    expect(page.locator("article.review-item").filter(has_text="York")).to_contain_text("kept both")
    shoot(page, "conflict-review-decided")
    assert Fact.objects.get(pk=leeds["fact"]["id"]).status == "active"
    assert Fact.objects.get(pk=york["fact"]["id"]).status == "active"


def test_the_policy_editor_shows_recall_and_precision_per_floor(
    page: Page, live_server, policy_editor, support_bot
):
    login(page, live_server, policy_editor, "/agents/")
    page.get_by_role("link", name="support-bot").click()
    table = page.locator("#relevance-tradeoff")
    expect(table.locator("h2")).to_have_text("How strict should relevance be?")
    expect(table.locator("tr.current")).to_contain_text("0.35")
    expect(table.locator("tr.current")).to_contain_text("recommended")
    expect(table).not_to_contain_text("min_relevance")
    shoot(page, "policy-relevance-table")
