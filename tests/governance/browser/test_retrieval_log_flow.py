"""An auditor reads the retrieval log in Chromium: filter by reason, open an event (issue 4's must-show)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from governance.rules.labels import label_for
from tests.personas import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_auditor_filters_by_reason_and_reads_an_event(page: Page, live_server, auditor, support_bot):
    # The region change: us-east-1 is superseded by eu-west-2 (R6), so the event explains it.
    support_bot.write(
        principal="alice",
        key="deployment_region",
        statement="Deploys to us-east-1",
        ref="chat:1",
    )
    support_bot.write(
        principal="alice",
        key="deployment_region",
        statement="Deploys to eu-west-2",
        ref="chat:2",
    )
    support_bot.write(
        principal="alice",
        key=None,
        statement="Prefers answers < 100 words & bullet lists",
        ref="chat:3",
    )
    region = support_bot.retrieve(principal="alice", session="s-alice")
    other = support_bot.retrieve(principal="bob", session="s-bob")
    event = support_bot.client.get(f"/api/v1/retrievals/{region['retrieval_id']}").json()
    reasons = {c["fact_id"]: c["reason"] for c in event["candidates"]}
    assert "superseded" in reasons.values()

    page.goto(f"{live_server.url}/login/?next=/retrievals/")
    page.fill("#id_username", auditor.username)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Retrieval log")).to_be_visible()
    rows = page.locator("#retrieval-log tbody tr[data-event]")
    expect(rows).to_have_count(2)

    # Filtering swaps only the results: the page (and this marker) survives, the URL follows.
    page.evaluate("window.stillTheSamePage = true")
    page.get_by_label("Excluded for").select_option("superseded")
    expect(rows).to_have_count(1)
    expect(page.locator(f'tr[data-event="{other["retrieval_id"]}"]')).to_have_count(0)
    assert page.evaluate("window.stillTheSamePage") is True
    assert "reason=superseded" in page.url

    page.get_by_role("link", name=f"#{region['retrieval_id']}", exact=True).click()
    expect(page.get_by_role("heading", name=f"Retrieval #{region['retrieval_id']}")).to_be_visible()
    # The exact injected text, its "<" and "&" shown as typed.
    assert "< 100 words & bullet" in region["context"]
    assert page.locator("#injected-text").inner_text() == region["context"]
    expect(page.locator("#token-bar")).to_have_attribute("value", str(region["tokens_used"]))
    for fact_id, reason in reasons.items():
        row = page.locator(f'table.candidates tr[data-fact="{fact_id}"]')
        # The reason reads as its plain label ("Replaced"), never as its code ("superseded").
        expect(row.locator("td.reason")).to_have_text(label_for("reason", reason).text if reason else "")
        expect(row.locator("td.decision")).to_have_text("excluded" if reason else "selected")
