"""Console retrieval pages: the log (filters, keyset pages, htmx fragment), one event, the principal page."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.models import Fact, Principal, Session, Tombstone
from governance.views import retrievals as views
from tests.personas import (
    PASSWORD,
    FactFactory,
    make_agent,
    make_retrieval_event,
    make_user,
)

pytestmark = pytest.mark.django_db

LOG = "/retrievals/"


@pytest.fixture
def auditor_client(client, auditor):
    client.login(username=auditor.username, password=PASSWORD)
    return client


@pytest.fixture
def reviewer_client(client, reviewer):
    client.login(username=reviewer.username, password=PASSWORD)
    return client


def shown(response) -> list[int]:
    """Event ids in the rendered table, in order: what the auditor actually sees."""
    return [int(i) for i in re.findall(r'<tr data-event="(\d+)"', response.content.decode())]


# --- the log -------------------------------------------------------------


@pytest.fixture
def varied_log(project, support_bot):
    """Six events, each the only one matching some filter."""
    billing = make_agent(project, "billing-bot")
    alice = Principal.objects.create(project=project, external_id="alice")
    bob = Principal.objects.create(project=project, external_id="bob")
    session = Session.objects.create(
        project=project, agent=support_bot.agent, principal=alice, external_id="s-9"
    )
    now = timezone.now()
    make = make_retrieval_event
    return {
        "plain": make(support_bot.agent, principal=alice, created_at=now - timedelta(hours=1)),
        "billing": make(billing.agent, principal=bob, created_at=now - timedelta(hours=2)),
        "stale": make(
            support_bot.agent,
            principal=bob,
            reasons=["stale"],
            excluded_count=1,
            created_at=now - timedelta(hours=3),
        ),
        "budget": make(
            support_bot.agent,
            principal=bob,
            reasons=["duplicate", "over_budget"],
            excluded_count=4,
            tokens_used=598,
            created_at=now - timedelta(hours=4),
        ),
        "new": make(support_bot.agent, principal=None, mode="new", created_at=now - timedelta(days=3)),
        "session": make(
            support_bot.agent, principal=alice, session=session, created_at=now - timedelta(days=10)
        ),
    }


def test_log_lists_the_projects_events_newest_first(auditor_client, varied_log):
    response = auditor_client.get(LOG)
    assert response.status_code == 200
    expected = [e.pk for e in sorted(varied_log.values(), key=lambda e: e.created_at, reverse=True)]
    assert shown(response) == expected
    assert f'href="/retrievals/{varied_log["plain"].pk}/"' in response.content.decode()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"agent": "billing-bot"}, ["billing"]),
        ({"principal": "alice"}, ["plain", "session"]),
        ({"principal": "alice", "agent": "billing-bot"}, []),
        ({"session": "s-9"}, ["session"]),
        ({"mode": "new"}, ["new"]),
        ({"reason": "stale"}, ["stale"]),
        ({"reason": "duplicate"}, ["budget"]),
        ({"over_budget": "on"}, ["budget"]),
        ({"principal": "nobody"}, []),
    ],
)
def test_each_filter_narrows_the_log(auditor_client, varied_log, params, expected):
    response = auditor_client.get(LOG, params)
    assert shown(response) == [varied_log[name].pk for name in expected]


def test_period_filter_is_since_inclusive_until_exclusive(auditor_client, varied_log):
    since, until = varied_log["new"].created_at, varied_log["billing"].created_at
    response = auditor_client.get(LOG, {"since": since.isoformat(), "until": until.isoformat()})
    assert shown(response) == [varied_log["stale"].pk, varied_log["budget"].pk, varied_log["new"].pk]


def test_period_filter_takes_the_datetime_local_inputs_minutes(auditor_client, varied_log):
    since = (varied_log["stale"].created_at + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    response = auditor_client.get(LOG, {"since": since})
    assert shown(response) == [varied_log["plain"].pk, varied_log["billing"].pk]
    assert f'value="{since}"' in response.content.decode()


def test_an_invalid_filter_shows_the_error_instead_of_rows(auditor_client, varied_log):
    response = auditor_client.get(LOG, {"reason": "because", "cursor": "garbage"})
    assert response.status_code == 200
    assert shown(response) == []
    body = response.content.decode()
    assert "reason: Select a valid choice" in body
    assert "This page link is not valid" in body


def _follow_older(client, url: str, seen: list[list[int]]) -> None:
    for _ in range(20):  # a cursor that stops advancing must fail the test, not hang it
        if not url:
            return
        response = client.get(url)
        seen.append(shown(response))
        url = response.context["older_url"]
    raise AssertionError("the older links never ended")


def test_keyset_pages_cover_equal_timestamps_exactly_once(auditor_client, support_bot, monkeypatch):
    monkeypatch.setattr(views, "PAGE_SIZE", 3)
    tie = timezone.now() - timedelta(minutes=5)
    # Seven events share one timestamp, so only the id can split them across pages.
    events = [make_retrieval_event(support_bot.agent, created_at=tie) for _ in range(7)]
    events += [
        make_retrieval_event(support_bot.agent, created_at=tie + timedelta(seconds=s)) for s in (1, -1)
    ]
    expected = [e.pk for e in sorted(events, key=lambda e: (e.created_at, e.pk), reverse=True)]

    pages: list[list[int]] = []
    _follow_older(auditor_client, LOG, pages)

    assert [len(p) for p in pages] == [3, 3, 3]
    assert [pk for page in pages for pk in page] == expected


def test_keyset_pages_keep_the_filters_and_never_use_offset(
    auditor_client, varied_log, support_bot, monkeypatch
):
    monkeypatch.setattr(views, "PAGE_SIZE", 1)
    first = auditor_client.get(LOG, {"principal": "bob"})
    older = first.context["older_url"]
    assert parse_qs(urlparse(older).query)["principal"] == ["bob"]
    with CaptureQueriesContext(connection) as queries:
        pages = [shown(first)]
        _follow_older(auditor_client, older, pages)
    assert pages == [[varied_log["billing"].pk], [varied_log["stale"].pk], [varied_log["budget"].pk]]
    assert not any("OFFSET" in q["sql"].upper() for q in queries.captured_queries)
    last = auditor_client.get(older)
    assert 'rel="next"' not in auditor_client.get(last.context["older_url"]).content.decode()


def test_htmx_filter_request_gets_only_the_results_fragment(auditor_client, varied_log):
    response = auditor_client.get(LOG, {"reason": "stale"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="retrieval-log"')
    assert "<html" not in body and "<form" not in body
    assert shown(response) == [varied_log["stale"].pk]
    assert "HX-Request" in response["Vary"]
    # A history restore after hx-push-url needs the whole page back.
    restore = auditor_client.get(LOG, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in restore.content.decode()


def test_log_never_shows_another_projects_events(client, outsider, varied_log, outsider_bot):
    theirs = make_retrieval_event(outsider_bot.agent)
    client.login(username=outsider.username, password=PASSWORD)
    assert shown(client.get(LOG)) == [theirs.pk]
    assert shown(client.get(LOG, {"agent": "support-bot"})) == []


def test_log_needs_login(client, varied_log):
    response = client.get(LOG)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_log_page_query_count_does_not_grow_with_rows(
    auditor_client, support_bot, project, django_assert_max_num_queries
):
    principals = [Principal.objects.create(project=project, external_id=f"p-{i}") for i in range(5)]
    for i in range(40):
        session = Session.objects.create(
            project=project, agent=support_bot.agent, principal=principals[i % 5], external_id=f"s-{i}"
        )
        make_retrieval_event(
            support_bot.agent, principal=principals[i % 5], session=session, reasons=["stale"]
        )
    # session, user, roles, agents for the form, project ids, page keys, page rows
    with django_assert_max_num_queries(7):
        response = auditor_client.get(LOG)
    assert len(shown(response)) == 40
    with django_assert_max_num_queries(8):  # + principal ids for the walked index
        auditor_client.get(LOG, {"principal": principals[0].external_id, "reason": "stale"})


# --- one event -------------------------------------------------------------


def test_event_page_shows_injected_text_and_every_candidates_decision(auditor_client, support_bot):
    old = support_bot.write(key="deployment_region", statement="Deploys to us-east-1", ref="chat:1")
    new = support_bot.write(key="deployment_region", statement="Deploys to eu-west-2", ref="chat:2")
    data = support_bot.retrieve()

    response = auditor_client.get(f"/retrievals/{data['retrieval_id']}/")
    assert response.status_code == 200
    body = response.content.decode()
    injected = re.search(r'<pre class="memory-text injected" id="injected-text">(.*?)</pre>', body, re.S)
    assert injected is not None
    assert injected.group(1) == data["context"].replace("&", "&amp;").replace("<", "&lt;").replace(
        ">", "&gt;"
    )
    rows = dict(re.findall(r'<tr data-fact="(\d+)" class="(\w+)">', body))
    assert rows == {str(old["fact"]["id"]): "excluded", str(new["fact"]["id"]): "selected"}
    assert re.search(
        rf'data-fact="{old["fact"]["id"]}".*?<td class="reason"><span class="badge reason">'
        r'<abbr title="A newer fact replaced it.">Replaced</abbr>',
        body,
        re.S,
    )
    assert f'href="/facts/{old["fact"]["id"]}/"' in body
    assert f'<meter id="token-bar" min="0" max="{data["token_budget"]}"' in body
    assert f'value="{data["tokens_used"]}"' in body
    assert 'href="/retrievals/principals/acme/alice/?agent=support-bot"' in body


def test_event_page_escapes_memory_text_inside_hx_disable(auditor_client, support_bot, project):
    alice = Principal.objects.create(project=project, external_id="alice")
    payload = '<img src=x onerror="alert(1)"> <div hx-get="/logout/" hx-trigger="load">'
    event = make_retrieval_event(support_bot.agent, principal=alice, context=f"- {payload}", query=payload)
    body = auditor_client.get(f"/retrievals/{event.pk}/").content.decode()
    assert payload not in body
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in body
    section = re.search(r'<section class="card" hx-disable>(.*?)</section>', body, re.S)
    assert section is not None and "&lt;img" in section.group(1)


def test_another_projects_event_is_404(auditor_client, outsider_bot):
    theirs = make_retrieval_event(outsider_bot.agent)
    assert auditor_client.get(f"/retrievals/{theirs.pk}/").status_code == 404


# --- the principal page ------------------------------------------------------


@pytest.fixture
def alice_facts(project, support_bot):
    alice = Principal.objects.create(project=project, external_id="alice")
    now = timezone.now()
    return {
        "recent": FactFactory(
            project=project,
            principal=alice,
            kind="profile",
            statement="Lives in Lyon",
            source_observed_at=now - timedelta(days=2),
        ),
        "confirm": FactFactory(
            project=project,
            principal=alice,
            kind="preference",
            statement="Prefers email",
            source_observed_at=now - timedelta(days=20),
        ),
        "stale": FactFactory(
            project=project,
            principal=alice,
            kind="preference",
            statement="Uses Python 3.9",
            source_observed_at=now - timedelta(days=200),
        ),
        "disputed": FactFactory(
            project=project, principal=alice, kind="profile", statement="Is the CTO", confidence="disputed"
        ),
        "superseded": FactFactory(
            project=project, principal=alice, kind="profile", statement="Lives in Paris", status="superseded"
        ),
    }


def tiers(body: str) -> dict[int, list[str]]:
    out = {}
    for fact_id, cell in re.findall(r'<tr data-fact="(\d+)".*?<td class="tier">(.*?)</td>', body, re.S):
        out[int(fact_id)] = re.findall(r'<span class="badge [\w ]+">([\w ]+)</span>', cell)
    return out


def test_principal_page_groups_active_facts_with_tiers(auditor_client, alice_facts):
    response = auditor_client.get("/retrievals/principals/acme/alice/")
    assert response.status_code == 200
    body = response.content.decode()
    f = alice_facts
    assert tiers(body) == {
        f["recent"].pk: ["recent"],
        f["disputed"].pk: ["recent", "disputed"],
        f["confirm"].pk: ["confirm"],
        f["stale"].pk: ["stale"],
    }
    assert [k for k in re.findall(r'data-kind="(\w+)"', body)] == ["preference", "profile"]
    assert "Lives in Paris" not in body
    # Auditors read; only reviewers get the actions.
    assert "/withdraw/" not in body and "/verify/" not in body


def test_principal_page_tiers_follow_the_chosen_agents_policy(auditor_client, project, alice_facts):
    make_agent(project, "strict-bot", recent_days=1, confirm_days=10, min_authority=5)
    body = auditor_client.get("/retrievals/principals/acme/alice/", {"agent": "strict-bot"}).content.decode()
    assert '<option value="strict-bot" selected>' in body
    assert tiers(body)[alice_facts["recent"].pk] == ["confirm", "below authority floor"]
    assert tiers(body)[alice_facts["confirm"].pk] == ["stale", "below authority floor"]


def test_reviewer_withdraws_and_verifies_from_the_principal_page(reviewer_client, alice_facts):
    page = "/retrievals/principals/acme/alice/?agent=support-bot"
    body = reviewer_client.get(page).content.decode()
    stale = alice_facts["stale"]
    assert f'action="/facts/{stale.pk}/verify"' in body

    response = reviewer_client.post(
        f"/facts/{stale.pk}/verify",
        {"reason": "Confirmed on the phone", "next": page},
    )
    assert response.status_code == 302 and response["Location"] == page
    stale.refresh_from_db()
    assert stale.confidence == "verified"
    assert tiers(reviewer_client.get(page).content.decode())[stale.pk] == ["recent"]

    wrong = alice_facts["disputed"]
    response = reviewer_client.post(
        f"/facts/{wrong.pk}/withdraw",
        {"reason": "The person asked us to forget it", "next": page},
    )
    assert response.status_code == 302
    wrong.refresh_from_db()
    assert (wrong.status, wrong.statement) == ("withdrawn", "")
    assert Tombstone.objects.filter(fact=wrong).exists()
    assert "Is the CTO" not in reviewer_client.get(page).content.decode()


def test_withdraw_without_reason_changes_nothing(reviewer_client, alice_facts):
    fact = alice_facts["recent"]
    reviewer_client.post(f"/facts/{fact.pk}/withdraw", {"reason": "  "})
    fact.refresh_from_db()
    assert fact.status == "active"


def test_auditor_cannot_withdraw(auditor_client, alice_facts):
    fact = alice_facts["recent"]
    response = auditor_client.post(f"/facts/{fact.pk}/withdraw", {"reason": "no"})
    assert response.status_code == 403
    assert Fact.objects.get(pk=fact.pk).status == "active"


def test_principal_and_facts_of_another_project_are_404(client, other_project, alice_facts):
    user = make_user("otto", "reviewer", other_project)
    client.login(username=user.username, password=PASSWORD)
    assert client.get("/retrievals/principals/acme/alice/").status_code == 404
    fact = alice_facts["recent"]
    assert client.post(f"/facts/{fact.pk}/withdraw", {"reason": "x"}).status_code == 404
    assert Fact.objects.get(pk=fact.pk).status == "active"


def test_log_links_each_principal_to_their_page(auditor_client, varied_log):
    body = auditor_client.get(LOG, {"principal": "alice"}).content.decode()
    assert 'href="/retrievals/principals/acme/alice/?agent=support-bot"' in body
