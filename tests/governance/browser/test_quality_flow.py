"""A policy editor starts a quality run in Chromium and reads its results (issue 14)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from governance.services import evaluations
from tests.personas import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set to a folder to keep screenshots of the pages at desktop and phone widths.
SHOTS = os.environ.get("QUALITY_SHOTS")


def shoot(page: Page, name: str) -> None:
    if SHOTS:
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(Path(SHOTS) / f"{name}-{width}.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 900})


def test_policy_editor_starts_a_run_and_sees_what_failed(page: Page, live_server, policy_editor):
    # An earlier run from the command line that missed: the broken policy.
    broken = evaluations.create_run(
        [evaluations.SCENARIO_DIR / "broken" / "broken_policy.yaml"], origin="command"
    )
    evaluations.execute_run(broken.pk)

    page.goto(f"{live_server.url}/login/?next=/quality/")
    page.fill("#id_username", policy_editor.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Memory quality")
    expect(page.locator(f'tr[data-run="{broken.pk}"]')).to_contain_text("missed")

    page.select_option("#quality-scenario", "swapped_identifiers")
    page.click("#start-quality-run")
    # Tasks run eagerly in tests, so the run has finished when its page loads.
    expect(page.locator("h1")).to_contain_text("all met")
    expect(page.locator('tr[data-scenario="swapped-identifiers"]')).to_contain_text("met")
    shoot(page, "quality-run")

    page.goto(f"{live_server.url}/quality/runs/{broken.pk}/")
    expect(page.locator('tr[data-scenario="broken-policy"] td.missed')).not_to_have_count(0)
    expect(page.locator("tr.quality-notes")).to_contain_text("gave forbidden item")
    shoot(page, "quality-failed-run")

    page.goto(f"{live_server.url}/quality/")
    shoot(page, "quality-history")


def test_an_auditor_asks_why_an_agent_did_not_know(page: Page, live_server, auditor, support_bot, project):
    response = support_bot.client.post(
        "/api/v1/writes",
        {
            "principal": "alice",
            "kind": "profile",
            "key": "city",
            "statement": "Alice lives in Leeds.",
            "source": {"type": "user_statement", "ref": "chat:1", "observed_at": timezone.now().isoformat()},
        },
        format="json",
    )
    assert response.status_code == 201

    page.goto(f"{live_server.url}/login/?next=/quality/why/")
    page.fill("#id_username", auditor.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.select_option("#id_project", project.slug)
    page.fill("#id_principal", "alice")
    page.fill("#id_phrase", "Leeds")
    page.click("#why-ask")
    expect(page.locator('li[data-verdict="never_a_candidate"]')).to_contain_text("Alice lives in Leeds.")
    shoot(page, "quality-why")
