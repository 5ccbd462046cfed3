"""An auditor filters the history to one fact, opens its timeline and downloads an export (issue 6)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from governance.models import AuditEntry
from governance.services import audit
from tests.governance.review_helpers import propose
from tests.personas import PASSWORD, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_auditor_filters_to_a_fact_opens_its_timeline_and_exports(
    page: Page, live_server, project, support_bot
):
    make_user("audra", "auditor", project)
    first, second = (
        propose(
            support_bot, f"Deploys to {region}", source_type="user_statement", kind="profile", key="region"
        )
        for region in ("us-east-1", "eu-west-2")
    )
    propose(support_bot, "Prefers tea over coffee", source_type="user_statement")
    fact_id = first.fact_id
    about_fact = {
        e.pk
        for e in AuditEntry.objects.filter(project=project)
        if (e.object_type, e.object_id) in {("fact", str(fact_id)), ("write", str(first.pk))}
    }
    assert len(about_fact) == 2  # its write, and its supersession by the second write

    page.goto(f"{live_server.url}/login/?next=/history/")
    page.fill("#id_username", "audra")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="History")).to_be_visible()
    rows = page.locator("#audit-history tbody tr[data-source]")
    expect(rows).to_have_count(AuditEntry.objects.filter(project=project).count())

    # Filter to the one fact: htmx swaps the results and pushes the filtered URL.
    page.fill("#id_fact", str(fact_id))
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(rf"fact={fact_id}"))
    expect(rows).to_have_count(len(about_fact))
    assert {int(r.get_attribute("data-id") or 0) for r in rows.all()} == about_fact
    expect(page.locator("#audit-history")).to_contain_text("fact.superseded")
    expect(page.locator("#audit-history")).not_to_contain_text("Prefers tea")

    # Its timeline.
    page.locator(f'#audit-history a[data-timeline][href="/history/facts/{fact_id}/"]').first.click()
    expect(page.get_by_role("heading", name=re.compile(rf"Timeline of fact F-{fact_id}"))).to_be_visible()
    timeline = page.locator("ol.audit-timeline")
    expect(timeline.locator('li[data-kind="supersession"]')).to_have_count(1)
    expect(timeline.locator('li[data-kind="audit"]')).to_have_count(len(about_fact))
    expect(timeline).to_contain_text(f"fact F-{second.fact_id}")

    # And its export, downloaded as a file.
    with page.expect_download() as info:
        page.locator('a[data-export="csv"]').click()
    download = info.value
    assert download.suggested_filename.startswith("audit-history-") and download.suggested_filename.endswith(
        ".csv"
    )
    table = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert {int(r["id"]) for r in table} == about_fact
    assert {r["action"] for r in table} == {"write.submitted", "fact.superseded"}


def test_auditor_verifies_the_chain_and_reads_the_result_in_words(
    page: Page, live_server, project, support_bot, real_worker
):
    make_user("audra", "auditor", project)
    propose(support_bot, "Prefers tea over coffee", source_type="user_statement")
    audit.seal_all()  # the worker seals after commit: sealed now, so the page shows every hash
    page.goto(f"{live_server.url}/login/?next=/history/")
    page.fill("#id_username", "audra")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # Each entry shows its hash and its predecessor's, shortened; the full value is on hover.
    latest = AuditEntry.objects.filter(project=project, sequence__isnull=False).order_by("-sequence").first()
    assert latest is not None
    short = page.locator(f'code.hash[data-hash="{latest.entry_hash}"]').first
    expect(short).to_have_text(f"{latest.entry_hash[:10]}…")
    expect(short).to_have_attribute("title", latest.entry_hash)

    page.get_by_role("button", name="Verify the chain").click()
    # A real worker walks the chain; the page polls until it reports.
    result = page.locator('#verify-result [data-verified="intact"]')
    expect(result).to_contain_text("The audit chain is intact", timeout=30_000)
    entries = AuditEntry.objects.filter(project=project).count()
    expect(result).to_contain_text(f"all {entries} entries link to each other")
