"""Personal data does not stay behind in the browser after logout (least authority, issue 19 item 7)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.governance.review_helpers import propose
from tests.personas import PASSWORD, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "Alice prefers email over phone calls"


def storage(page: Page) -> str:
    return page.evaluate("() => JSON.stringify(sessionStorage) + JSON.stringify(localStorage)")


def test_no_page_snapshot_or_cached_page_holds_memory_after_logout(
    page: Page, live_server, project, support_bot
) -> None:
    make_user("riley", "reviewer", project)
    write = propose(support_bot, SECRET)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "riley")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    response = page.goto(f"{live_server.url}/facts/{write.fact_id}/")
    assert response is not None
    assert "no-store" in response.headers["cache-control"]
    expect(page.get_by_text(SECRET).first).to_be_visible()
    # Move on through the console, as a reviewer would, so htmx could snapshot the page.
    page.goto(f"{live_server.url}/reviews/")
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    assert SECRET not in storage(page)
    # A snapshot left by an older console: logging out must clear it too.
    page.evaluate(f"() => sessionStorage.setItem('htmx-history-cache', JSON.stringify(['{SECRET}']))")

    page.locator("form.logout button").click()
    expect(page.locator("#id_username")).to_be_visible()

    assert SECRET not in storage(page)
    page.go_back()
    assert SECRET not in page.content()
