"""The policy editor's live preview in Chromium: one real retrieval re-ranked, and the rulers,
follow the values as they are typed (issue 16), before anything is saved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from governance.models import PolicyDraft
from tests.governance.browser.helpers import log_in
from tests.governance.policy_helpers import retrieve, write
from tests.personas import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shoot(page: Page, name: str, part: str) -> None:
    """At desktop and phone widths, when SCREENSHOT_DIR names a folder: the page, and ``part`` of
    it close up; never wider than the phone."""
    folder = os.environ.get("SCREENSHOT_DIR")
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} scrolls at {width}"
        if folder:
            page.screenshot(path=str(Path(folder) / f"{name}-{width}.png"), full_page=True)
            page.locator(part).screenshot(path=str(Path(folder) / f"{name}-part-{width}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})


def test_the_ranking_and_the_rulers_follow_the_draft_while_it_is_typed(
    page: Page, live_server, project, support_bot
):
    make_user("pat", "policy_editor", project)
    newer = write(support_bot, "Uses a screen reader", days_ago=1)["fact"]["id"]
    older = write(support_bot, "Prefers invoices by email", days_ago=10)["fact"]["id"]
    retrieve(support_bot, session="s-1")

    log_in(page, live_server, "pat", "/agents/acme/support-bot/")
    ranking = page.locator("#ranking")
    expect(ranking).to_contain_text("The same facts would be injected.")
    expect(ranking.locator(f'tr[data-fact="{newer}"] [data-side="published"]')).to_contain_text("#1")
    expect(page.locator("#freshness figure.ruler")).to_have_count(1)

    # One item at most: after a pause in typing, the second fact drops out, nothing saved.
    page.fill("#id_max_items", "1")
    expect(ranking.locator("#ranking-summary")).to_have_text("1 fact would go in or out.")
    row = ranking.locator(f'tr[data-fact="{older}"]')
    expect(row.locator("[data-move]")).to_have_text("Drops out")
    expect(row.locator('[data-side="draft"]')).to_contain_text("left out: over the token budget")
    expect(ranking).to_contain_text("the values typed above (not saved)")

    # The rulers follow too, one above the other on the same scale.
    page.fill("#id_confirm_days", "60")
    expect(page.locator('#freshness [data-ruler="1"] figcaption')).to_contain_text(
        "Values typed: recent up to 7 days, re-confirm up to 60 days"
    )
    expect(page.locator("#freshness svg[data-scale='75']")).to_have_count(2)
    page.fill("#id_recent_days", "2")
    expect(page.locator('#freshness [data-ruler="1"] figcaption')).to_contain_text("recent up to 2 days")
    expect(page.locator('#freshness [data-ruler="1"] [data-tier="recent"]')).to_have_text("1")
    expect(page.locator("#ranking")).to_contain_text("ranked under version 1 and under the values typed")
    assert not PolicyDraft.objects.filter(agent=support_bot.agent).exists()
    page.locator("#ranking").scroll_into_view_if_needed()
    shoot(page, "policy-ranking-preview", "#live")

    # A value the rules refuse: the preview says so and stays on what was valid.
    page.fill("#id_confirm_days", "1")
    expect(page.locator("#live-errors")).to_contain_text("Must be greater than")

    # Saved, the draft is what the page shows on its next load.
    page.fill("#id_confirm_days", "60")
    page.click("#save-draft")
    expect(page.locator(".saved")).to_have_text("Draft saved.")
    page.reload()
    expect(page.locator("#ranking-summary")).to_have_text("1 fact would go in or out.")
    expect(page.locator("#freshness svg[data-scale='75']")).to_have_count(2)
