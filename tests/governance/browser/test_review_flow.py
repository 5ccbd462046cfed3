"""A reviewer works the queue in real Chromium; planted markup stays text and fires nothing (issue 3)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from governance.models import Fact, ReviewDecision, Write
from tests.governance.browser.helpers import log_in
from tests.governance.review_helpers import PENDING, QUARANTINED, hostile, propose
from tests.personas import PASSWORD, FactFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_reviewer_approves_and_rejects_and_planted_markup_is_inert(
    page: Page, live_server, project, support_bot
):
    make_user("riley", "reviewer", project)
    to_approve = propose(support_bot, PENDING)
    to_reject = propose(support_bot, QUARANTINED, source_type="web_page")
    # The bait is what the planted hx-post would approve if htmx ever processed it.
    bait = propose(support_bot, "Said they switched to a standing desk")
    planted_url = f"/reviews/{bait.pk}/decide"
    planted = propose(support_bot, hostile(planted_url))
    assert (to_approve.status, to_reject.status, bait.status, planted.status) == (
        "pending_review",
        "quarantined",
        "pending_review",
        "quarantined",
    )

    requests: list[tuple[str, str]] = []
    dialogs: list[str] = []
    page.on("request", lambda request: requests.append((request.method, request.url)))

    def on_dialog(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)

    page.goto(f"{live_server.url}/login/?next=/reviews/")
    page.fill("#id_username", "riley")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    counts = page.locator("#review-counts")
    expect(counts.locator('[data-count="pending_review"]')).to_have_text("2")
    expect(counts.locator('[data-count="quarantined"]')).to_have_text("2")

    # The planted statement is on screen as literal text, and nothing in it became an element.
    statement = page.locator(f"#write-{planted.pk} [data-statement]")
    expect(statement).to_have_text(hostile(planted_url))
    expect(page.get_by_text('<img src=x onerror="alert(document.domain)">').first).to_be_visible()
    assert page.locator(f"#write-{planted.pk} img, #write-{planted.pk} [data-statement] button").count() == 0
    assert page.locator("[onerror]").count() == 0

    # Approve with the mouse.
    item = page.locator(f"#write-{to_approve.pk}")
    item.locator("textarea[name=reason]").fill("Confirmed with the user on the call")
    item.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(f"#write-{to_approve.pk}")).to_contain_text("approved by riley")
    expect(counts.locator('[data-count="pending_review"]')).to_have_text("1")

    # Reject with the keyboard: pick the item, "r" opens its reason, Ctrl+Enter submits as reject.
    page.locator(f"#write-{to_reject.pk} .item-head .risk").click()
    page.keyboard.press("r")
    reason = page.locator(f"#reason-{to_reject.pk}")
    expect(reason).to_be_focused()
    page.keyboard.type("Instruction planted by a product page")
    page.keyboard.press("Control+Enter")
    expect(page.locator(f"#write-{to_reject.pk}")).to_contain_text("rejected by riley")
    expect(counts.locator('[data-count="quarantined"]')).to_have_text("1")

    # The facts changed status in the database.
    assert Fact.objects.get(pk=to_approve.fact_id).status == "active"
    assert Fact.objects.get(pk=to_reject.fact_id).status == "rejected"
    decisions = {d.write_id: (d.action, d.reason) for d in ReviewDecision.objects.all()}
    assert decisions == {
        to_approve.pk: ("approve", "Confirmed with the user on the call"),
        to_reject.pk: ("reject", "Instruction planted by a product page"),
    }

    # Nothing the planted markup asked for happened.
    page.wait_for_timeout(500)
    assert dialogs == []
    assert not [url for _, url in requests if url.endswith(planted_url) or url.endswith("/x")]
    posts = [url for method, url in requests if method == "POST" and "/decide" in url]
    assert sorted(posts) == sorted(
        f"{live_server.url}/reviews/{w.pk}/decide" for w in (to_approve, to_reject)
    )
    assert Write.objects.get(pk=bait.pk).status == "pending_review"
    assert Write.objects.get(pk=planted.pk).status == "quarantined"


def test_a_decision_can_be_undone_for_a_few_seconds_and_then_is_final(
    page: Page, live_server, project, support_bot, settings
):
    settings.REVIEW_UNDO_SECONDS = 3
    make_user("riley", "reviewer", project)
    first = propose(support_bot, PENDING)
    second = propose(support_bot, "Said they switched to a standing desk")
    page.goto(f"{live_server.url}/login/?next=/reviews/")
    page.fill("#id_username", "riley")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # The triage list: a click on a row selects that write's details.
    page.locator(f'[data-row="{second.pk}"]').click()
    expect(page.locator(f"#write-{second.pk}")).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator(f'[data-row="{second.pk}"]')).to_have_attribute("aria-current", "true")

    item = page.locator(f"#write-{first.pk}")
    item.locator("textarea[name=reason]").fill("Confirmed with the user")
    item.get_by_role("button", name="Approve", exact=True).click()
    expect(item).to_contain_text("approved by riley")
    item.get_by_role("button", name="Undo").click()
    expect(item.locator(".notice")).to_contain_text("waits for review again")
    expect(item.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    assert Write.objects.get(pk=first.pk).status == "pending_review"
    assert list(
        ReviewDecision.objects.filter(write=first).order_by("sequence").values_list("action", flat=True)
    ) == [
        "approve",
        "undo",
    ]

    other = page.locator(f"#write-{second.pk}")
    other.locator("textarea[name=reason]").fill("Not a lasting preference")
    other.get_by_role("button", name="Reject", exact=True).click()
    expect(other).to_contain_text("rejected by riley")
    expect(other.get_by_role("button", name="Undo")).to_be_visible()
    # After the window the button is gone, and the decision stands.
    expect(other.locator("[data-undo-closed]")).to_be_visible(timeout=6000)
    assert other.get_by_role("button", name="Undo").count() == 0
    assert Write.objects.get(pk=second.pk).status == "rejected"


# Set to a folder to keep screenshots of the queue at desktop and phone widths.
SHOTS = os.environ.get("REVIEW_SHOTS") or os.environ.get("SCREENSHOT_DIR")


def open_queue_holding_similar_facts(page: Page, live_server: Any) -> Route:
    """Riley's queue with its two writes on screen and their similar facts' request held back."""
    held: list[Route] = []
    page.route("**/reviews/similar?*", lambda route: held.append(route))
    log_in(page, live_server, "riley", "/reviews/")
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    page.wait_for_function("() => document.querySelectorAll('[data-similar-pending]').length === 2")
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    assert len(held) == 1, "the page asks once for the similar facts of all its writes"
    return held[0]


def test_similar_facts_arrive_after_the_page_and_leave_a_reviewers_edit_alone(
    page: Page, live_server, project, support_bot
):
    """The similar facts come in a second request; whatever the reviewer typed meanwhile stays."""
    make_user("riley", "reviewer", project)
    write = propose(support_bot, "Prefers window seats on long flights")
    other = propose(support_bot, "Said they switched to a standing desk", principal="bob")
    FactFactory.create(
        project=project, principal=write.principal, statement="Prefers aisle seats on long flights"
    )
    # The similar facts are held back until the reviewer has typed, as on a slow day.
    held = open_queue_holding_similar_facts(page, live_server)
    assert f"write={write.pk}" in held.request.url and f"write={other.pk}" in held.request.url

    item = page.locator(f"#write-{write.pk}")
    item.locator("textarea[name=reason]").fill("Checked with the customer")
    item.get_by_text("Edit before approving").click()
    item.locator("textarea[name=statement]").fill("Prefers window seats on flights over four hours")
    held.continue_()

    expect(item.locator(".similar")).to_contain_text("Prefers aisle seats on long flights")
    expect(page.locator("[data-similar-pending]")).to_have_count(0)
    expect(item.locator("textarea[name=reason]")).to_have_value("Checked with the customer")
    expect(item.locator("textarea[name=statement]")).to_have_value(
        "Prefers window seats on flights over four hours"
    )
    # A box with nothing similar stays empty: no heading, no list.
    expect(page.locator(f"#similar-{other.pk} .similar")).to_have_count(0)
    if SHOTS:
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(Path(SHOTS) / f"review-queue-{width}.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 900})

    item.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(f"#write-{write.pk}")).to_contain_text("approved with edits by riley")
    assert Fact.objects.get(pk=write.fact_id).statement == "Prefers window seats on flights over four hours"


def test_a_card_decided_before_its_similar_facts_arrive_leaves_no_error_behind(
    page: Page, live_server, project, support_bot
):
    """The similar facts of a card the reviewer already decided have nowhere to go: dropped quietly."""
    make_user("riley", "reviewer", project)
    first = propose(support_bot, "Prefers window seats on long flights")
    second = propose(support_bot, "Said they switched to a standing desk", principal="bob")
    FactFactory.create(
        project=project, principal=first.principal, statement="Prefers aisle seats on long flights"
    )
    FactFactory.create(
        project=project, principal=second.principal, statement="Said they use a standing desk at work"
    )
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    held = open_queue_holding_similar_facts(page, live_server)
    # The server answers while both are pending; the answer reaches the page after a decision.
    answer = held.fetch()

    decided = page.locator(f"#write-{second.pk}")
    decided.locator("textarea[name=reason]").fill("Not worth keeping")
    decided.get_by_role("button", name="Reject", exact=True).click()
    expect(decided).to_contain_text("rejected by riley")
    expect(page.locator(f"#similar-{second.pk}")).to_have_count(0)
    held.fulfill(response=answer)

    # The card still open gets its similar facts; the decided one stays as it was.
    expect(page.locator(f"#write-{first.pk} .similar")).to_contain_text("Prefers aisle seats on long flights")
    expect(page.locator("[data-similar-pending]")).to_have_count(0)
    expect(decided).not_to_contain_text("standing desk at work")
    page.wait_for_timeout(300)
    assert errors == []
