"""The auditors' console: history browser, a fact's timeline, the streamed export (issue 6 item 3)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import cast

import pytest
from django.db import connection, transaction
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.context import actor_scope
from governance.models import AuditEntry, Fact, Job
from governance.services import audit, retention, reviews
from governance.services import facts as fact_service
from governance.views import audit as audit_views
from tests.governance.review_helpers import HOSTILE, PENDING, assert_inert, propose
from tests.personas import make_retrieval_event

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def audra(client, auditor):
    client.force_login(auditor)
    return client


def rows(html: str) -> list[tuple[str, int]]:
    return [(source, int(pk)) for source, pk in re.findall(r'<tr data-source="(\w+)" data-id="(\d+)">', html)]


def streamed(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(cast(Iterator[bytes], response.streaming_content)).decode()


@pytest.fixture
def story(support_bot, reviewer):
    """Facts, writes, a decision, a supersession, retrievals and a withdrawal in project acme."""
    first = propose(
        support_bot, "Deploys to us-east-1", source_type="user_statement", kind="profile", key="region"
    )
    second = propose(
        support_bot, "Deploys to eu-west-2", source_type="user_statement", kind="profile", key="region"
    )
    pending = propose(support_bot, PENDING)
    # As in the console, where the middleware names the signed-in reviewer as the actor.
    with actor_scope("user:riley", user=reviewer):
        reviews.decide(pending.pk, reviews.Decision("approve", "Confirmed on the call"), reviewer=reviewer)
    event = support_bot.retrieve()
    other_person = propose(support_bot, "Prefers tea", source_type="user_statement", principal="bob")
    return {
        "old": first.fact_id,
        "new": second.fact_id,
        "approved": pending.fact_id,
        "bob": other_person.fact_id,
        "retrieval": event["retrieval_id"],
    }


def test_urls_are_named():
    assert reverse("audit:history") == "/history/"
    assert reverse("audit:fact_timeline", args=[7]) == "/history/facts/7/"
    assert reverse("audit:export") == "/history/export"


def test_history_lists_audit_entries_and_retrievals_newest_first(audra, story, project):
    html = audra.get(reverse("audit:history"), {"show": "all"}).content.decode()

    listed = rows(html)
    assert ("retrieval", story["retrieval"]) in listed
    entries = AuditEntry.objects.filter(project=project)
    assert {pk for source, pk in listed if source == "audit"} == set(entries.values_list("pk", flat=True))
    times = [AuditEntry.objects.get(pk=pk).created_at if source == "audit" else None for source, pk in listed]
    audit_times = [t for t in times if t is not None]
    assert audit_times == sorted(audit_times, reverse=True)
    assert "write.approve" in html and "fact.superseded" in html and "Confirmed on the call" in html


def test_history_is_scoped_to_the_users_projects(client, story, outsider, outsider_bot):
    outsider_bot.retrieve(principal="olga-customer")
    client.force_login(outsider)

    listed = rows(client.get(reverse("audit:history")).content.decode())

    assert listed
    assert (
        AuditEntry.objects.filter(
            pk__in=[pk for s, pk in listed if s == "audit"], project__slug="acme"
        ).count()
        == 0
    )
    assert ("retrieval", story["retrieval"]) not in listed


@pytest.mark.parametrize(
    ("params", "expect"),
    [
        ({"action": "write"}, lambda e: e.action.startswith("write.")),
        ({"action": "write.approve"}, lambda e: e.action == "write.approve"),
        ({"actor": "user:riley"}, lambda e: e.actor == "user:riley"),
    ],
    ids=["action-family", "exact-action", "actor"],
)
def test_filters_by_action_and_actor(audra, story, project, params, expect):
    listed = rows(audra.get(reverse("audit:history"), params).content.decode())

    wanted = [e.pk for e in AuditEntry.objects.filter(project=project) if expect(e)]
    assert wanted
    assert sorted(pk for source, pk in listed if source == "audit") == sorted(wanted)
    assert not [pk for source, pk in listed if source == "retrieval"]


def test_retrieval_action_and_agent_actor_list_only_retrievals(audra, story):
    for params in ({"action": "retrieval"}, {"actor": "agent:support-bot", "action": "retrieval"}):
        listed = rows(audra.get(reverse("audit:history"), params).content.decode())
        assert listed == [("retrieval", story["retrieval"])]


def test_filter_by_fact_finds_its_entries_writes_supersession_and_retrievals(audra, story):
    html = audra.get(reverse("audit:history"), {"fact": story["new"]}).content.decode()
    listed = rows(html)

    entries = AuditEntry.objects.filter(pk__in=[pk for s, pk in listed if s == "audit"])
    assert {e.action for e in entries} == {"write.submitted", "fact.superseded"}
    # The supersession is recorded on the old fact; it belongs to the new fact's history too.
    assert entries.get(action="fact.superseded").object_id == str(story["old"])
    assert ("retrieval", story["retrieval"]) in listed


def test_filter_by_principal_and_period(audra, story):
    listed = rows(audra.get(reverse("audit:history"), {"principal": "bob"}).content.decode())
    entries = AuditEntry.objects.filter(pk__in=[pk for s, pk in listed if s == "audit"])
    assert [(e.action, e.object_type) for e in entries] == [("write.submitted", "write")]

    future = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert rows(audra.get(reverse("audit:history"), {"since": future}).content.decode()) == []
    past = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert rows(audra.get(reverse("audit:history"), {"until": past}).content.decode()) == []
    bad = audra.get(reverse("audit:history"), {"since": future, "until": past}).content.decode()
    assert "The period must end after it starts." in bad


def test_keyset_pages_walk_everything_once(audra, story, project, monkeypatch, support_bot):
    for n in range(3):
        support_bot.retrieve(session=f"s-page-{n}")
    monkeypatch.setattr(audit_views, "PAGE_SIZE", 4)
    expected = AuditEntry.objects.filter(project=project).count() + 4

    seen: list[tuple[str, int]] = []
    # Everything: decisions and other changes, and retrieval traffic (the page opens on decisions).
    url: str | None = reverse("audit:history") + "?show=all"
    pages = 0
    while url:
        html = audra.get(url).content.decode()
        page = rows(html)
        assert 0 < len(page) <= 4
        seen.extend(page)
        pages += 1
        match = re.search(r'<a rel="next" href="([^"]+)"', html)
        url = match.group(1).replace("&amp;", "&") if match else None

    assert len(seen) == len(set(seen)) == expected
    assert pages == -(-expected // 4)


def test_bad_cursor_is_an_error_on_the_page(audra, story):
    html = audra.get(reverse("audit:history"), {"cursor": "nonsense"}).content.decode()
    assert "This page link is not valid" in html
    assert rows(html) == []


def test_htmx_request_gets_only_the_results_fragment(audra, story):
    response = audra.get(reverse("audit:history"), {"action": "fact"}, **HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="audit-history"')
    assert "<html" not in html
    assert "HX-Request" in response["Vary"]


def test_history_page_query_count_does_not_grow_with_rows(audra, story, support_bot):
    with CaptureQueriesContext(connection) as few:
        audra.get(reverse("audit:history"))
    for n in range(10):
        propose(support_bot, f"Owns {n + 3} houseplants", source_type="user_statement")
        support_bot.retrieve(session=f"more-{n}")
    with CaptureQueriesContext(connection) as many:
        audra.get(reverse("audit:history"))
    assert len(many) == len(few)


def test_agent_supplied_text_is_inert_in_the_history(audra, support_bot):
    write = propose(support_bot, "Prefers window seats", source_type="user_statement")
    fact_service.withdraw_fact(Fact.objects.get(writes=write), reason=HOSTILE, actor="agent:support-bot")

    html = audra.get(reverse("audit:history")).content.decode()
    assert assert_inert(html) >= 1
    html = audra.get(reverse("audit:fact_timeline", args=[write.fact_id])).content.decode()
    assert assert_inert(html) >= 1


def test_history_is_read_only(audra, story):
    count = AuditEntry.objects.count()
    # Refused either way: 405 for a page with no write action, 403 for a role without one.
    for url in (
        reverse("audit:history"),
        reverse("audit:export"),
        reverse("audit:fact_timeline", args=[story["new"]]),
    ):
        assert audra.post(url, {"format": "csv"}).status_code in (403, 405), url
    assert AuditEntry.objects.count() == count


# --- a fact's timeline ---------------------------------------------------------------------


def test_fact_timeline_combines_audit_history_supersession_and_retrievals(audra, story):
    html = audra.get(reverse("audit:fact_timeline", args=[story["old"]])).content.decode()

    kinds = re.findall(r'<li class="\w+" data-kind="(\w+)">', html)
    assert {"audit", "history", "supersession", "retrieval"} <= set(kinds)
    assert "fact.superseded" in html and "write.submitted" in html
    assert f'href="/history/facts/{story["new"]}/"' in html
    assert "superseded" in html and f"retrieval #{story['retrieval']}" in html
    times = re.findall(r'data-kind="\w+">\s*<time datetime="([^"]+)"', html)
    assert times == sorted(times)


def test_withdrawn_fact_timeline_shows_the_tombstone_not_the_statement(audra, support_bot):
    write = propose(support_bot, "Lives at 12 Rue de la Paix", source_type="user_statement")
    with actor_scope("user:riley"):
        fact_service.withdraw_fact(Fact.objects.get(writes=write), reason="GDPR request", actor="user:riley")

    html = audra.get(reverse("audit:fact_timeline", args=[write.fact_id])).content.decode()

    assert "Rue de la Paix" not in html
    assert "Tombstone #" in html and "GDPR request" in html and "fact.withdrawn" in html


def test_fact_timeline_of_another_project_is_404(client, story, outsider):
    client.force_login(outsider)
    assert client.get(reverse("audit:fact_timeline", args=[story["old"]])).status_code == 404
    assert client.get(reverse("audit:fact_timeline", args=[999_999])).status_code == 404


# --- export ------------------------------------------------------------------------------------


def test_csv_export_streams_the_filtered_history_oldest_first(audra, story, project):
    response = audra.get(reverse("audit:export"), {"format": "csv", "action": "write"})

    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-history-')
    table = list(csv.DictReader(io.StringIO(streamed(response))))
    expected = AuditEntry.objects.filter(project=project, action__startswith="write.").order_by(
        "created_at", "id"
    )
    assert [int(r["id"]) for r in table] == list(expected.values_list("pk", flat=True))
    assert {r["source"] for r in table} == {"audit"}
    first = table[0]
    assert first["entry_hash"] == expected[0].entry_hash and json.loads(first["data"])["outcome"]


def test_jsonl_export_includes_retrievals_without_their_text(audra, story):
    response = audra.get(reverse("audit:export"), {"format": "jsonl", "fact": story["new"]})

    lines = [json.loads(line) for line in streamed(response).splitlines()]
    retrieval = [row for row in lines if row["source"] == "retrieval"]
    assert [row["id"] for row in retrieval] == [story["retrieval"]]
    assert retrieval[0]["principal"] == "alice" and retrieval[0]["data"]["agent"] == "support-bot"
    assert "Deploys to" not in json.dumps(lines)
    assert [row["created_at"] for row in lines] == sorted(row["created_at"] for row in lines)


def test_csv_export_defuses_formulas_from_agent_text(audra, support_bot, project):
    write = propose(support_bot, "Prefers aisle seats", source_type="user_statement")
    fact_service.withdraw_fact(
        Fact.objects.get(writes=write),
        reason='=HYPERLINK("http://evil.example","x")',
        actor="agent:support-bot",
    )

    table = list(csv.DictReader(io.StringIO(streamed(audra.get(reverse("audit:export"), {"format": "csv"})))))

    reasons = [r["reason"] for r in table if r["action"] == "fact.withdrawn"]
    assert reasons == ['\'=HYPERLINK("http://evil.example","x")']


def test_export_is_scoped_and_rejects_bad_input(client, audra, story, outsider):
    assert audra.get(reverse("audit:export"), {"format": "xml"}).status_code == 400
    assert audra.get(reverse("audit:export"), {"format": "csv", "fact": "x"}).status_code == 400
    client.force_login(outsider)
    body = streamed(client.get(reverse("audit:export"), {"format": "jsonl"}))
    assert '"project":"acme"' not in body


def test_export_reads_through_a_server_side_cursor(audra, story, project, monkeypatch):
    """Rows are fetched in chunks while the response streams, not loaded up front."""
    from governance.selectors import audit as selectors

    for n in range(30):
        with actor_scope("test"):
            from django.db import transaction

            with transaction.atomic():
                audit.record(project, "fact.verified", ("fact", n), reason=f"bulk {n}")
    chunk_sizes: list[int] = []
    real = selectors._audit_export_rows

    def spy(qs, chunk_size):
        chunk_sizes.append(chunk_size)
        return real(qs, 7)

    monkeypatch.setattr(selectors, "_audit_export_rows", spy)
    response = audra.get(reverse("audit:export"), {"format": "jsonl", "action": "fact.verified"})
    chunks = list(response.streaming_content)
    assert chunk_sizes == [selectors.EXPORT_CHUNK]
    assert sum(chunk.count(b"\n") for chunk in chunks) == 30


def test_history_opens_on_decisions_and_changes_with_retrievals_in_their_own_tab(audra, story):
    changes = audra.get(reverse("audit:history")).content.decode()
    assert 'aria-current="page">Decisions and changes' in changes
    assert f'data-source="retrieval" data-id="{story["retrieval"]}"' not in changes
    assert 'data-source="audit"' in changes
    retrievals = audra.get(reverse("audit:history"), {"show": "retrievals"}).content.decode()
    assert f'data-source="retrieval" data-id="{story["retrieval"]}"' in retrievals
    assert 'data-source="audit"' not in retrievals
    # The export link exports what the tab shows.
    export = re.search(r'href="([^"]+)" download data-export="csv"', retrievals)
    assert export is not None and "show=retrievals" in export.group(1)


def test_each_audit_row_shows_its_hash_and_its_predecessors_shortened(audra, project):
    audit.seal_all()
    entry = AuditEntry.objects.filter(project=project, sequence__isnull=False).order_by("-sequence").first()
    assert entry is not None
    html = audra.get(reverse("audit:history")).content.decode()
    assert f'title="{entry.entry_hash}" data-hash="{entry.entry_hash}"' in html
    assert f"{entry.entry_hash[:10]}…" in html and f'data-hash="{entry.previous_hash}"' in html


def test_an_entry_not_sealed_yet_is_shown_in_plain_words_without_hashes(audra, project):
    with transaction.atomic():
        entry = audit.record(project, "project.archived", project, reason="Waiting for its place")
    html = audra.get(reverse("audit:history")).content.decode()
    assert "Waiting for its place" in html and "being added to the chain" in html
    assert entry.sequence is None and 'data-hash=""' not in html


def test_verify_chain_answers_with_the_result_in_words(audra, project, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = audra.post(reverse("audit:verify"), {"project": project.slug}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    job = Job.objects.get(kind="verify_audit", project=project)
    html = audra.get(reverse("audit:verification", args=[job.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-verified="intact"' in html and "The audit chain is intact" in html


def test_verify_chain_of_a_project_not_mine_is_refused_and_queues_nothing(audra, other_project):
    response = audra.post(reverse("audit:verify"), {"project": other_project.slug}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "Choose one of your projects" in response.content.decode()
    assert not Job.objects.filter(kind="verify_audit").exists()


def test_someone_elses_verification_job_is_a_404(client, other_project, outsider, auditor):
    from governance.services.verification import start_verification

    job = start_verification(other_project, user=outsider)
    client.force_login(auditor)
    assert client.get(reverse("audit:verification", args=[job.pk])).status_code == 404


def test_an_expired_month_of_retrievals_reads_in_the_history(audra, support_bot):
    make_retrieval_event(
        support_bot.agent, query="a", context="- a", created_at=datetime(2025, 6, 6, tzinfo=UTC)
    )
    retention.expire_month(date(2025, 6, 1))

    html = audra.get(reverse("audit:history"), {"action": "retrievals.expired"}).content.decode()

    [(source, pk)] = rows(html)
    assert (source, pk) == ("audit", AuditEntry.objects.get(action="retrievals.expired").pk)
    assert "Retrievals expired" in html and "2025-06" in html
    assert "Past the retention period of 190 days." in html
