"""A reviewer forgets a person from their page: dry run, reason and confirmation, receipt (issue 18)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from governance.context import actor_scope
from governance.models import Fact, Project
from governance.services import writes
from tests.personas import PASSWORD, AgentPersona, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_forgets_a_person_after_the_dry_run_and_gets_a_verified_receipt(
    page: Page, live_server: Any, project: Project, support_bot: AgentPersona
) -> None:
    make_user("riley", "reviewer", project)
    with actor_scope("agent:support-bot"):
        for statement in ("Prefers the night train", "Sister is called <i>Ana</i>"):
            writes.submit_write(
                support_bot.agent,
                writes.WriteRequest(
                    principal="cust-5150",
                    kind="preference",
                    key=None,
                    statement=statement,
                    source_type="user_statement",
                    source_ref="chat:3",
                    source_observed_at=timezone.now(),
                ),
            )

    page.goto(f"{live_server.url}/login/?next=/retrievals/principals/{project.slug}/cust-5150/")
    page.fill("#id_username", "riley")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.locator("#forget-person").click()

    # The dry run comes first, and changes nothing.
    expect(page.locator('#dry-run-counts tr[data-kind="preference"] td').nth(1)).to_have_text("2")
    assert Fact.objects.filter(principal__external_id="cust-5150", status="active").count() == 2
    page.fill("#forget-reason", "Data-protection request DP-31")
    page.get_by_label("I understand this cannot be undone.").check()
    page.locator("#forget-button").click()

    expect(page.get_by_role("heading", name="Erasure receipt")).to_be_visible()
    expect(page.locator("#receipt-verified")).to_be_visible()
    expect(page.locator('#receipt-counts tr[data-kind="preference"] td').nth(1)).to_have_text("2")
    expect(page.locator("#receipt-why")).to_have_text("Data-protection request DP-31")
    expect(page.locator("body")).not_to_contain_text("night train")
    if os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(
            path=os.path.join(os.environ["SCREENSHOT_DIR"], "erasure-receipt.png"), full_page=True
        )
