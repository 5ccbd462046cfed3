"""A policy editor edits a draft, previews it against recorded traffic, and publishes it, in real Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from governance.models import Job, PolicyVersion
from governance.services import policies as policy_service
from governance.services import replay as replay_service
from tests.governance.browser.helpers import log_in
from tests.governance.policy_helpers import retrieve, write
from tests.personas import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_policy_editor_edits_previews_and_publishes(page: Page, live_server, project, support_bot):
    make_user("pat", "policy_editor", project)
    write(support_bot, "Uses a screen reader", days_ago=3)
    stale_soon = write(support_bot, "Prefers invoices by email", days_ago=20)
    recorded = retrieve(support_bot, session="s-1")
    assert recorded["policy_version"] == 1

    log_in(page, live_server, "pat", "/agents/")
    expect(page.get_by_role("heading", name="Agents & policies")).to_be_visible()
    page.get_by_role("link", name="support-bot").click()
    expect(page.locator("#active-version")).to_have_text("version 1")

    # A value the rules refuse is explained next to its field, and nothing is saved.
    page.fill("#id_confirm_days", "5")
    page.click("#save-draft")
    expect(page.locator("#id_confirm_days_error")).to_contain_text("Must be greater than “Recent for (days)”")
    expect(page.locator("#diff")).to_contain_text("No draft.")

    page.fill("#id_confirm_days", "10")
    page.click("#save-draft")
    expect(page.locator(".saved")).to_have_text("Draft saved.")
    expect(page.locator('#diff tr[data-field="confirm_days"]')).to_contain_text("30")
    expect(page.locator('#diff tr[data-field="confirm_days"] ins')).to_have_text("10")
    # Not previewed yet: publishing is possible, with a warning that says what is being skipped.
    expect(page.locator("[data-unpreviewed]")).to_contain_text("This draft has not been previewed")
    expect(page.locator('#freshness [data-ruler="1"] [data-tier="stale"]')).to_have_text("1")

    # Preview: tasks run in-process in tests, so the preview is done when its page opens.
    page.fill("#id_events", "100")
    page.click("#start-replay")
    expect(page.get_by_role("heading", name="Preview: draft against version 1")).to_be_visible()
    expect(page.locator("#changed-events")).to_have_text("1")
    row = page.locator(f'tr[data-event="{recorded["retrieval_id"]}"]')
    expect(row.locator(f'.item.dropped[data-fact="{stale_soon["fact"]["id"]}"]')).to_contain_text("Too old")
    expect(row.locator(".item.dropped .memory-text")).to_have_text("Prefers invoices by email")
    expect(page.locator("#tokens svg.bars")).to_be_visible()
    assert page.locator("#reasons svg.bars rect").count() >= 2

    # Publish is offered right under the result of this draft's preview.
    expect(page.locator("#publish-from-result")).to_be_visible()

    page.get_by_role("link", name="support-bot policy").click()
    expect(page.locator("[data-unpreviewed]")).to_have_count(0)
    page.fill("#id_reason", "Twenty-day-old memory confused users; the preview showed one retrieval changes")
    page.click("#publish-draft")
    expect(page.locator("#active-version")).to_have_text("version 2")
    expect(page.locator('#versions tr[data-version="2"]')).to_contain_text("pat")
    expect(page.locator('#versions tr[data-version="2"]')).to_contain_text(
        "Twenty-day-old memory confused users"
    )

    version = PolicyVersion.objects.get(agent=support_bot.agent, version=2)
    assert version.policy.confirm_days == 10
    assert version.created_by is not None and version.created_by.username == "pat"
    assert retrieve(support_bot, session="s-2")["policy_version"] == 2


def test_progress_bar_follows_a_running_replay_and_turns_into_the_result(
    page: Page, live_server, project, support_bot, monkeypatch
):
    editor = make_user("pat", "policy_editor", project)
    write(support_bot, "Prefers invoices by email", days_ago=20)
    retrieve(support_bot, session="s-1")
    monkeypatch.setattr(replay_service, "_enqueue", lambda job_id: None)  # queued until this test runs it
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=editor)
    job = replay_service.start_replay(support_bot.agent, 10, user=editor)
    Job.objects.filter(pk=job.pk).update(status="running", progress_done=3, progress_total=10)

    log_in(page, live_server, "pat", f"/agents/acme/support-bot/replays/{job.pk}/")
    expect(page.locator("#replay-bar")).to_have_attribute("value", "3")
    Job.objects.filter(pk=job.pk).update(progress_done=7)
    expect(page.locator("#replay-bar")).to_have_attribute("value", "7")  # htmx polled the fragment

    Job.objects.filter(pk=job.pk).update(status="queued")
    replay_service.run(job.pk)
    expect(page.locator("#changed-events")).to_have_text("1", timeout=10_000)  # the poll reloaded the page
    expect(page.locator("#replay-progress")).to_have_count(0)
