"""The console's fact page: provenance, timelines, chain, history, and the reviewer's actions."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.models import AuditEntry, Fact, Tombstone
from governance.services import reviews
from tests.governance.review_helpers import HOSTILE, PENDING, assert_inert, propose

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def page(client, fact_id: int | None) -> str:
    response = client.get(reverse("facts:detail", args=[fact_id]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def riley(client, reviewer):
    client.force_login(reviewer)
    return client


@pytest.fixture
def region_chain(support_bot):
    """Three user statements about one key: us-east-1 -> eu-west-2 -> ap-south-1 (R6)."""
    writes = [
        propose(
            support_bot, f"Deploys to {region}", source_type="user_statement", kind="profile", key="region"
        )
        for region in ("us-east-1", "eu-west-2", "ap-south-1")
    ]
    return [Fact.objects.get(pk=w.fact_id) for w in writes]


def test_detail_url_is_named():
    assert reverse("facts:detail", args=[7]) == "/facts/7/"


def test_page_shows_provenance_status_authority_confidence_and_embedding(riley, support_bot):
    write = propose(support_bot, "Prefers dark mode", source_type="user_statement")
    fact = Fact.objects.get(pk=write.fact_id)

    html = page(riley, fact.pk)

    assert "Prefers dark mode" in html
    assert "user_statement" in html and fact.source_ref in html and "agent:support-bot" in html
    assert (
        '<span class="badge active"><abbr title="In memory: agents may receive it.">Active</abbr></span>'
        in html
    )
    assert "<dd data-authority>4</dd>" in html
    assert "<dd>unverified</dd>" in html
    assert "not embedded" in html

    Fact.objects.filter(pk=fact.pk).update(embedding=[0.1] * 384, embedded_at=timezone.now())
    assert "embedded 20" in page(riley, fact.pk)


def test_validity_timeline_orders_the_moments_and_places_now(riley, support_bot):
    write = propose(
        support_bot,
        "Works from the Lisbon office",
        source_type="user_statement",
        valid_to=timezone.now() + timedelta(days=30),
    )

    html = page(riley, write.fact_id)

    labels = re.findall(r"</time> ([^<]+)</li>", html)
    assert labels == [
        "Observed at the source",
        "Last verified (freshness counts from here)",
        "Recorded",
        "Now",
        "Valid until",
    ]
    assert '<li class="future">' in html


def test_supersession_chain_is_drawn_both_ways_from_the_middle(riley, region_chain):
    oldest, middle, newest = region_chain

    html = page(riley, middle.pk)

    nodes = [
        int(pk)
        for pk in re.findall(r'<li class="chain-node[^"]*"[^>]*>\s*<a [^>]*href="/facts/(\d+)/"', html)
    ]
    assert nodes == [oldest.pk, middle.pk, newest.pk]
    assert re.search(rf'chain-node current" aria-current="true">\s*<a [^>]*href="/facts/{middle.pk}/"', html)
    assert html.count('class="chain-link"') == 2
    assert "Deploys to us-east-1" in html and "Deploys to ap-south-1" in html
    assert html.count("rule:R6") == 2


def test_audit_history_and_row_history_are_listed(riley, region_chain):
    oldest = region_chain[0]

    html = page(riley, oldest.pk)

    assert "fact.superseded" in html
    assert re.search(
        r"Status</abbr>: <span class=\"memory-text\">active</span> → "
        r"<span class=\"memory-text\">superseded</span>",
        html,
    )
    assert "insert" in html.lower()


def test_writes_and_decisions_behind_the_fact(riley, support_bot, reviewer):
    write = propose(support_bot, PENDING)
    reviews.decide(write.pk, reviews.Decision("approve", "Heard it on the call"), reviewer=reviewer)

    html = page(riley, write.fact_id)

    assert f"W-{write.pk}" in html
    assert "Approve by riley" in html
    assert "Heard it on the call" in html
    # The fact page lists the same audit entries as the fact's timeline, the write's among them:
    # it once said "No audit entries name this fact" while the timeline named it.
    timeline = riley.get(f"/history/facts/{write.fact_id}/").content.decode()
    for action in ("write.submitted", "write.approve"):
        assert (action in html) == (action in timeline), action
    assert "write.submitted" in html
    assert "No audit entries name this fact" not in html


def test_verify_records_the_reason_in_the_audit_trail(riley, support_bot):
    write = propose(support_bot, "Prefers dark mode", source_type="user_statement")

    response = riley.post(reverse("facts:verify", args=[write.fact_id]), {"reason": "Asked them directly"})

    assert response.status_code == 302
    fact = Fact.objects.get(pk=write.fact_id)
    assert fact.confidence == "verified"
    entry = AuditEntry.objects.get(object_type="fact", object_id=str(fact.pk), action="fact.verified")
    assert entry.reason == "Asked them directly"
    html = page(riley, fact.pk)
    assert "fact.verified" in html and "Asked them directly" in html


def test_verifying_a_fact_that_is_not_active_is_refused_with_the_reason(riley, support_bot):
    write = propose(support_bot, PENDING)

    response = riley.post(reverse("facts:verify", args=[write.fact_id]), {"reason": "x"}, **HTMX)

    assert response.status_code == 409
    assert "Only active facts can be verified." in response.content.decode()
    assert Fact.objects.get(pk=write.fact_id).confidence == "unverified"


def test_change_authority(riley, support_bot):
    write = propose(support_bot, "Prefers dark mode", source_type="user_statement")

    response = riley.post(
        reverse("facts:authority", args=[write.fact_id]), {"authority": "2", "reason": "Hearsay"}
    )

    assert response.status_code == 302
    assert Fact.objects.get(pk=write.fact_id).authority == 2
    assert AuditEntry.objects.filter(action="fact.authority_changed", reason="Hearsay").exists()


@pytest.mark.parametrize(
    ("action", "data", "error"),
    [
        ("withdraw", {"reason": ""}, "Give a reason"),
        ("verify", {"reason": " "}, "Give a reason"),
        ("authority", {"authority": "2", "reason": ""}, "Give a reason"),
        ("authority", {"authority": "9", "reason": "x"}, "Select a valid choice"),
    ],
)
def test_actions_need_valid_input_and_change_nothing_otherwise(riley, support_bot, action, data, error):
    write = propose(support_bot, "Prefers dark mode", source_type="user_statement")

    response = riley.post(reverse(f"facts:{action}", args=[write.fact_id]), data)

    assert response.status_code == 400
    assert error in response.content.decode()
    fact = Fact.objects.get(pk=write.fact_id)
    assert (fact.status, fact.confidence, fact.authority) == ("active", "unverified", 4)


def test_withdraw_erases_the_statement_and_leaves_a_tombstone(riley, support_bot):
    write = propose(support_bot, "Lives at 12 Elm Street", source_type="user_statement")

    response = riley.post(
        reverse("facts:withdraw", args=[write.fact_id]), {"reason": "GDPR request #88"}, **HTMX
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and 'id="fact"' in html
    assert "withdrawn" in html and "Lives at 12 Elm Street" not in html
    fact = Fact.objects.get(pk=write.fact_id)
    assert (fact.status, fact.statement) == ("withdrawn", "")
    assert Tombstone.objects.get(fact=fact).actor == "user:riley"


@pytest.mark.parametrize("persona", ["auditor", "policy_editor"])
def test_other_roles_read_the_page_but_cannot_act(client, support_bot, persona, request):
    client.force_login(request.getfixturevalue(persona))
    write = propose(support_bot, "Prefers dark mode", source_type="user_statement")

    html = page(client, write.fact_id)
    assert "Reviewer actions" not in html
    for action, data in (
        ("withdraw", {"reason": "x"}),
        ("verify", {"reason": "x"}),
        ("authority", {"authority": 1, "reason": "x"}),
    ):
        assert client.post(reverse(f"facts:{action}", args=[write.fact_id]), data).status_code == 403
    fact = Fact.objects.get(pk=write.fact_id)
    assert (fact.status, fact.confidence, fact.authority) == ("active", "unverified", 4)


def test_another_projects_fact_is_404(client, outsider, support_bot):
    client.force_login(outsider)
    write = propose(support_bot, "Prefers dark mode", source_type="user_statement")

    assert client.get(reverse("facts:detail", args=[write.fact_id])).status_code == 404
    assert client.post(reverse("facts:withdraw", args=[write.fact_id]), {"reason": "x"}).status_code == 404
    assert Fact.objects.get(pk=write.fact_id).status == "active"


def test_hostile_statement_is_inert_on_the_fact_page(riley, support_bot):
    write = propose(support_bot, HOSTILE)

    html = page(riley, write.fact_id)

    assert "&lt;img src=x onerror=" in html
    assert_inert(html)


def test_withdraw_from_the_principal_page_returns_there(client, reviewer, project):
    from tests.personas import FactFactory, PrincipalFactory

    person = PrincipalFactory.create(project=project, external_id="dana")
    fact = FactFactory.create(project=project, principal=person, statement="Dana's old phone number is 555")
    back = reverse("retrievals:principal", args=[project.slug, "dana"])
    client.force_login(reviewer)
    response = client.post(
        reverse("facts:withdraw", args=[fact.pk]), {"reason": "Dana asked us to forget it", "next": back}
    )
    assert response.status_code == 302 and response["Location"] == back
    fact.refresh_from_db()
    assert fact.status == "withdrawn" and fact.statement == ""
    # An off-site "next" is ignored: the fact page is the fallback.
    other = FactFactory.create(project=project, principal=person, statement="Dana likes tea")
    response = client.post(
        reverse("facts:verify", args=[other.pk]), {"reason": "Confirmed", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("facts:detail", args=[other.pk])


# --- The fact list (issue 16 item 7) -------------------------------------------


def test_the_fact_list_filters_by_the_query_string_and_links_every_id(riley, project, other_project):
    from tests.personas import FactFactory, PrincipalFactory

    carol = PrincipalFactory.create(project=project, external_id="carol")
    tea = FactFactory.create(project=project, principal=carol, statement="Carol prefers green tea")
    FactFactory.create(project=project, statement="Office opens at nine", kind="project_fact")
    FactFactory.create(project=other_project, statement="Globex prefers green tea too")
    html = riley.get(reverse("facts:index"), {"q": "tea", "status": "active"}).content.decode()
    assert f'<a class="ref" href="/facts/{tea.pk}/" data-fact="{tea.pk}">F-{tea.pk}</a>' in html
    assert "Office opens" not in html and "Globex" not in html
    assert 'href="/retrievals/principals/acme/carol/"' in html
    # The filters are kept in the form, so the next submit and the pager keep them.
    assert 'value="tea"' in html and '<option value="active" selected>' in html
    # htmx asks for the results only.
    fragment = riley.get(reverse("facts:index"), {"q": "tea"}, **HTMX).content.decode()
    assert fragment.lstrip().startswith('<section id="results"') and "<html" not in fragment


def test_a_stale_or_hostile_filter_is_a_message_not_an_error(riley):
    for params in (
        {"status": "gone"},
        {"cursor": "-1"},
        {"cursor": "abc"},
        {"q": "x\x00"},
        {"project": "nope"},
    ):
        response = riley.get(reverse("facts:index"), params)
        assert response.status_code == 200, params
        assert 'class="errorlist"' in response.content.decode(), params


def test_the_fact_list_pages_keep_the_filters(riley, project):
    from tests.personas import FactFactory

    FactFactory.create_batch(51, project=project, kind="incident", statement="Outage report")
    html = riley.get(reverse("facts:index"), {"kind": "incident"}).content.decode()
    next_link = re.search(r'rel="next" href="([^"]+)"', html)
    assert next_link is not None
    assert "kind=incident" in next_link.group(1) and "cursor=" in next_link.group(1)
    second = riley.get(next_link.group(1).replace("&amp;", "&")).content.decode()
    assert second.count('<tr data-fact="') == 1
