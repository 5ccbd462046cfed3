"""The console as its three kinds of users meet it, in real Chromium (issue 16).

Editing before approving stores the edit; people whose role cannot decide see
no decision controls; a refused in-page action leaves the page whole with the
error next to the control; error pages keep the menu.
"""

from __future__ import annotations

import pytest
from django.test import override_settings
from playwright.sync_api import Page, expect

from governance.models import Fact, Membership, ReviewDecision, Write
from tests.governance.browser.helpers import log_in
from tests.governance.review_helpers import PENDING, QUARANTINED, propose
from tests.personas import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_approve_after_editing_stores_the_edit_and_quotes_it(page: Page, live_server, project, support_bot):
    make_user("riley", "reviewer", project)
    by_mouse = propose(support_bot, "The team bought 18 seats of the design tool")
    by_keys = propose(support_bot, PENDING)
    log_in(page, live_server, "riley", "/reviews/")

    item = page.locator(f"#write-{by_mouse.pk}")
    item.locator("textarea[name=reason]").fill("Checked the invoice: it is 20")
    item.get_by_text("Edit before approving").click()
    item.locator("textarea[name=statement]").fill("The team bought 20 seats of the design tool")
    item.get_by_role("button", name="Approve", exact=True).click()
    decided = page.locator(f"#write-{by_mouse.pk}")
    expect(decided).to_contain_text("approved with edits by riley")
    expect(decided.locator("[data-approved-text]")).to_have_text(
        "The team bought 20 seats of the design tool"
    )

    # The keyboard path: "a" opens the reason, Ctrl+Enter approves what the statement box holds.
    page.locator(f"#write-{by_keys.pk} .item-head .risk").click()
    page.locator(f"#write-{by_keys.pk}").get_by_text("Edit before approving").click()
    page.locator(f"#statement-{by_keys.pk}").fill("Enjoys hiking in the Alps")
    page.locator(f"#write-{by_keys.pk} .item-head .risk").click()
    page.keyboard.press("a")
    expect(page.locator(f"#reason-{by_keys.pk}")).to_be_focused()
    page.keyboard.type("They said so twice")
    page.keyboard.press("Control+Enter")
    expect(page.locator(f"#write-{by_keys.pk} [data-approved-text]")).to_have_text(
        "Enjoys hiking in the Alps"
    )

    stored = {
        w.pk: Fact.objects.get(pk=w.fact_id) for w in Write.objects.filter(pk__in=[by_mouse.pk, by_keys.pk])
    }
    assert stored[by_mouse.pk].statement == "The team bought 20 seats of the design tool"
    assert stored[by_keys.pk].statement == "Enjoys hiking in the Alps"
    assert set(ReviewDecision.objects.values_list("action", flat=True)) == {"edit_approve"}


@pytest.mark.parametrize("role", ["auditor", "policy_editor"])
def test_people_who_cannot_decide_see_no_decision_controls(
    page: Page, live_server, project, support_bot, role: str
):
    make_user("quinn", role, project)
    write = propose(support_bot, QUARANTINED, source_type="web_page")
    log_in(page, live_server, "quinn", "/reviews/")

    item = page.locator(f"#write-{write.pk}")
    expect(item).to_contain_text("Ignore previous instructions")
    expect(item).to_contain_text("lets you read this write, not decide it")
    for hidden in ("textarea", "button", "form", "input[type=checkbox]", "details.edit"):
        assert item.locator(hidden).count() == 0, hidden
    assert page.locator("#bulk-form").count() == 0
    assert page.locator(".shortcuts kbd").count() == 0
    page.keyboard.press("a")
    assert page.locator("[data-reason]").count() == 0


@override_settings(DEBUG=True)
def test_refused_bulk_decision_keeps_the_page_and_shows_the_error_in_place(
    page: Page, live_server, project, support_bot
):
    # Under DEBUG, django-htmx's debug script used to replace the page with the raw error.
    make_user("riley", "reviewer", project)
    write = propose(support_bot, PENDING)
    log_in(page, live_server, "riley", "/reviews/")
    assert page.locator("script[src*='django-htmx']").count() == 0

    page.fill("#bulk-reason", "Clearing the backlog")
    page.get_by_role("button", name="Approve selected").click()
    expect(page.locator("#bulk-write-error")).to_have_text("Select at least one write.")
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.locator(f"#write-{write.pk}")).to_be_visible()
    assert Write.objects.get(pk=write.pk).status == "pending_review"


def test_losing_the_role_mid_decision_says_so_in_place_and_keeps_the_reason(
    page: Page, live_server, project, support_bot
):
    riley = make_user("riley", "reviewer", project)
    write = propose(support_bot, PENDING)
    log_in(page, live_server, "riley", "/reviews/")
    reason = page.locator(f"#reason-{write.pk}")
    reason.fill("A long reason I do not want to type again")

    Membership.objects.filter(user=riley, project=project).update(role="auditor")
    page.locator(f"#write-{write.pk}").get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(f"#write-{write.pk} [data-htmx-error]")).to_contain_text("does not allow this")
    expect(reason).to_have_value("A long reason I do not want to type again")
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    assert Write.objects.get(pk=write.pk).status == "pending_review"


@override_settings(DEBUG=True)
def test_policy_draft_refused_in_place(page: Page, live_server, project, support_bot):
    make_user("pat", "policy_editor", project)
    log_in(page, live_server, "pat", f"/agents/{project.slug}/{support_bot.agent.slug}/")
    # The browser itself refuses a budget of 0 (min=1) without sending anything.
    page.fill("#id_token_budget", "0")
    page.click("#save-draft")
    assert page.locator("#id_token_budget").evaluate("e => e.validity.rangeUnderflow")
    # A value only the server's rules refuse comes back as a 400 shown next to its field.
    page.fill("#id_token_budget", "600")
    page.fill("#id_confirm_days", "5")
    page.click("#save-draft")
    expect(page.locator("#id_confirm_days_error")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    expect(page.locator("#save-draft")).to_be_visible()


def test_error_pages_keep_the_menu_and_styles(page: Page, live_server, project):
    make_user("ada", "auditor", project)
    log_in(page, live_server, "ada", "/")
    response = page.goto(f"{live_server.url}/facts/987654/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="History")).to_be_visible()
    background = page.locator("header.top").evaluate("e => getComputedStyle(e).backgroundColor")
    assert background == "rgb(29, 35, 48)"


def test_menu_opens_with_a_button_at_390_pixels(page: Page, live_server, project):
    make_user("ada", "auditor", project)
    page.set_viewport_size({"width": 390, "height": 800})
    log_in(page, live_server, "ada", "/")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to the content")).to_be_focused()
    page.get_by_role("button", name="Menu").click()
    for name in ("History", "Keys & tokens", "Retrievals"):
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_sla_banner_appears_when_the_oldest_item_is_older_than_the_sla(
    page: Page, live_server, project, support_bot
):
    from datetime import timedelta

    from django.utils import timezone

    from governance.models import Project

    make_user("riley", "reviewer", project)
    Project.objects.filter(pk=project.pk).update(review_sla_minutes=60)
    write = propose(support_bot, PENDING)
    Write.objects.filter(pk=write.pk).update(created_at=timezone.now() - timedelta(minutes=30))
    log_in(page, live_server, "riley", "/reviews/")
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    assert page.locator(".sla-banner").count() == 0

    Write.objects.filter(pk=write.pk).update(created_at=timezone.now() - timedelta(minutes=95))
    page.reload()
    banner = page.locator(f'.sla-banner[data-sla-breached="{project.slug}"]')
    expect(banner).to_contain_text("The acme queue is late")
    expect(banner).to_contain_text("1 h 35 min, longer than the 60-minute limit")


def test_queue_filters_stay_in_the_url(page: Page, live_server, project, other_project, support_bot):
    from tests.personas import grant, make_agent

    riley = make_user("riley", "reviewer", project)
    grant(riley, "reviewer", other_project)
    ours = propose(support_bot, PENDING)
    theirs = propose(make_agent(other_project, "globex-bot"), "Prefers the night shift rota in winter")
    log_in(page, live_server, "riley", f"/reviews/?project={other_project.slug}")
    expect(page.locator(f"#write-{theirs.pk}")).to_be_visible()
    assert page.locator(f"#write-{ours.pk}").count() == 0

    page.select_option("#id_project", "")
    page.select_option("#id_source", "chat_message")
    page.get_by_role("button", name="Filter").click()
    assert "source=chat_message" in page.url
    expect(page.locator(f"#write-{ours.pk}")).to_be_visible()
    expect(page.locator("#id_source")).to_have_value("chat_message")
