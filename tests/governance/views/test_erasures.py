"""The console's way to forget a person (issue 18 items 2-4): dry run first, then a reasoned
confirmation, then progress and a receipt that verifies against the audit chain."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from governance.models import Fact, Job, Principal, Project
from governance.services import writes
from tests.personas import PASSWORD, AgentPersona

pytestmark = pytest.mark.django_db

PERSON = "cust-3310"
STATEMENT = "Prefers <b>bold</b> letters on invoices"


@pytest.fixture
def person(project: Project, support_bot: AgentPersona) -> Principal:
    from django.utils import timezone

    for statement in (STATEMENT, "Pays by bank transfer"):
        writes.submit_write(
            support_bot.agent,
            writes.WriteRequest(
                principal=PERSON,
                kind="preference",
                key=None,
                statement=statement,
                source_type="user_statement",
                source_ref="chat:9",
                source_observed_at=timezone.now(),
            ),
        )
    return Principal.objects.get(project=project, external_id=PERSON)


def login(client: Client, user: Any) -> Client:
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_persons_page_leads_a_reviewer_to_a_dry_run_that_changes_nothing(
    client, reviewer, auditor, person
):
    page = login(client, reviewer).get(reverse("retrievals:principal", args=[person.project.slug, PERSON]))
    assert reverse("erasures:confirm", args=[person.pk]) in page.content.decode()

    response = client.get(reverse("erasures:confirm", args=[person.pk]))

    html = response.content.decode()
    assert response.status_code == 200
    assert '<tr data-kind="preference"><td>Preferences</td><td>2</td></tr>' in html
    assert 'id="forget-button"' in html
    assert Fact.objects.filter(principal=person, status="active").count() == 2
    # An auditor sees neither the link nor the form.
    auditor_client = login(Client(), auditor)
    page = auditor_client.get(reverse("retrievals:principal", args=[person.project.slug, PERSON]))
    assert reverse("erasures:confirm", args=[person.pk]) not in page.content.decode()
    assert (
        'id="forget-button"'
        not in auditor_client.get(reverse("erasures:confirm", args=[person.pk])).content.decode()
    )


def test_forgetting_needs_a_reason_and_the_confirmation(client, reviewer, person):
    login(client, reviewer)
    url = reverse("erasures:forget", args=[person.pk])

    no_tick = client.post(url, {"reason": "DP-9"})
    no_reason = client.post(url, {"reason": " ", "confirm": "yes"})

    assert no_tick.status_code == 400 and "cannot be undone" in no_tick.content.decode()
    assert no_reason.status_code == 400 and "Say why" in no_reason.content.decode()
    assert Principal.objects.get(pk=person.pk).external_id == PERSON
    assert not Job.objects.filter(kind="erasure").exists()


def test_a_confirmed_erasure_shows_a_verified_receipt_as_a_page_and_as_json(
    client, reviewer, auditor, person, django_capture_on_commit_callbacks
):
    login(client, reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("erasures:forget", args=[person.pk]), {"reason": "Request DP-9", "confirm": "yes"}
        )
    job = Job.objects.get(kind="erasure")
    assert response.status_code == 302 and response["Location"] == reverse("erasures:job", args=[job.pk])

    page = client.get(response["Location"]).content.decode()

    assert 'id="receipt-verified"' in page
    assert '<tr data-kind="preference"><td>Preferences</td><td>2</td></tr>' in page
    assert "Request DP-9" in page and f"user:{reviewer.username}" in page
    assert "bold" not in page and PERSON not in page
    download = client.get(reverse("erasures:receipt-json", args=[job.pk]))
    assert download["Content-Disposition"].startswith("attachment;")
    receipt = json.loads(download.content)
    assert receipt["counts"]["facts"]["preference"] == 2 and len(receipt["tombstones"]) == 2
    # An auditor may read the receipt too, but not start an erasure.
    auditor_client = login(Client(), auditor)
    assert auditor_client.get(reverse("erasures:job", args=[job.pk])).status_code == 200
    assert (
        auditor_client.post(
            reverse("erasures:forget", args=[person.pk]), {"reason": "x", "confirm": "yes"}
        ).status_code
        == 403
    )


def test_an_htmx_poll_of_a_running_erasure_gets_only_its_progress(client, reviewer, person):
    login(client, reviewer)
    client.post(reverse("erasures:forget", args=[person.pk]), {"reason": "Request DP-9", "confirm": "yes"})
    job = Job.objects.get(kind="erasure")
    assert job.status == "queued"  # the task runs after commit, which this test never reaches

    fragment = client.get(reverse("erasures:job", args=[job.pk]), HTTP_HX_REQUEST="true").content.decode()

    assert fragment.lstrip().startswith('<section id="erasure-progress"') and "<html" not in fragment
