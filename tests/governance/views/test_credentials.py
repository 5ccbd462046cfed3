"""Keys and tokens in the console: create (shown once), list with last use, revoke (issue 6 item 5)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import AgentKey, AuditEntry, PersonalAccessToken
from tests.governance.review_helpers import assert_inert
from tests.personas import make_user

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def admin_user(project):
    return make_user("ada", "admin", project)


@pytest.fixture
def ada(client, admin_user):
    client.force_login(admin_user)
    return client


def secret_in(html: str) -> str:
    match = re.search(r"<pre class=\"secret\" data-secret>([^<]+)</pre>", html)
    assert match, "no secret shown"
    return match.group(1)


def key_row(html: str, prefix: str) -> str:
    match = re.search(rf'<tr data-key="{prefix}">(.*?)</tr>', html, re.S)
    assert match, f"no row for key {prefix}"
    return match.group(1)


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_urls_are_named():
    assert reverse("credentials:list") == "/credentials/"
    assert reverse("credentials:key_revoke", args=[3]) == "/credentials/agent-keys/3/revoke"
    assert reverse("credentials:token_revoke", args=[3]) == "/credentials/tokens/3/revoke"


def test_admin_creates_an_agent_key_shown_once_that_works(ada, support_bot):
    response = ada.post(
        reverse("credentials:key_create"),
        {"agent": support_bot.agent.pk, "name": "staging", "scopes": ["read", "write", "forget"]},
    )

    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    secret = secret_in(response.content.decode())
    key = AgentKey.objects.get(name="staging")
    assert secret.startswith(f"mak_{key.prefix}_") and key.digest not in response.content.decode()
    assert bearer(secret).get("/api/v1/principals/nobody/memories").status_code == 404  # authenticated
    # Shown once: the list afterwards has the prefix, never the secret.
    listing = ada.get(reverse("credentials:list")).content.decode()
    assert key.prefix in listing and secret not in listing
    entry = AuditEntry.objects.get(action="agent_key.created", object_id=str(key.pk))
    assert entry.data["prefix"] == key.prefix


def test_admin_chooses_a_keys_scopes_and_the_list_shows_them(ada, support_bot):
    form = ada.get(reverse("credentials:list")).content.decode()
    for scope in ("read", "write", "forget"):
        # Every scope is offered, and checked until the admin narrows it.
        assert re.search(rf'<input type="checkbox" name="scopes" value="{scope}"[^>]* checked>', form), scope

    response = ada.post(
        reverse("credentials:key_create"),
        {"agent": support_bot.agent.pk, "name": "reader", "scopes": ["read"]},
    )
    assert response.status_code == 201
    key = AgentKey.objects.get(name="reader")
    assert key.scopes == ["read"]
    assert "Scopes: read." in response.content.decode()
    assert '<td class="key-scopes">read</td>' in key_row(
        ada.get(reverse("credentials:list")).content.decode(), key.prefix
    )
    withdrawn = bearer(secret_in(response.content.decode())).post(
        "/api/v1/facts/1/withdraw", {"reason": "asked", "principal": "alice"}, format="json"
    )
    assert withdrawn.status_code == 403 and withdrawn.json()["error"]["fields"] == {"scope": ["forget"]}


def test_a_key_without_any_scope_is_not_created(ada, support_bot):
    response = ada.post(reverse("credentials:key_create"), {"agent": support_bot.agent.pk, "name": "useless"})
    assert response.status_code == 400
    assert "Choose at least one thing the key may do." in response.content.decode()
    assert not AgentKey.objects.filter(name="useless").exists()


def test_list_shows_prefix_created_and_last_used(ada, support_bot):
    key = AgentKey.objects.get(agent=support_bot.agent)
    html = ada.get(reverse("credentials:list")).content.decode()
    row = key_row(html, key.prefix)
    assert "never" in row and "active" in row

    support_bot.client.get("/api/v1/principals/nobody/memories")

    html = ada.get(reverse("credentials:list")).content.decode()
    row = key_row(html, key.prefix)
    key.refresh_from_db()
    assert key.last_used_at is not None and key.last_used_at.strftime("%Y-%m-%d %H:%M") in row


def test_revoking_a_key_fails_its_next_call(ada, support_bot):
    key = AgentKey.objects.get(agent=support_bot.agent)
    assert support_bot.client.get("/api/v1/principals/nobody/memories").status_code == 404

    response = ada.post(reverse("credentials:key_revoke", args=[key.pk]), {"reason": "leaked in a log"})

    assert response.status_code == 302
    assert support_bot.client.get("/api/v1/principals/nobody/memories").status_code == 401
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert (
        AuditEntry.objects.get(action="agent_key.revoked", object_id=str(key.pk)).reason == "leaked in a log"
    )
    assert "revoked" in ada.get(reverse("credentials:list")).content.decode()


def test_revoking_needs_a_reason(ada, support_bot):
    key = AgentKey.objects.get(agent=support_bot.agent)
    ada.post(reverse("credentials:key_revoke", args=[key.pk]), {"reason": "  "})
    key.refresh_from_db()
    assert key.revoked_at is None


def test_agent_keys_need_the_admin_role(client, reviewer, support_bot):
    client.force_login(reviewer)
    key = AgentKey.objects.get(agent=support_bot.agent)

    assert client.get(reverse("credentials:list")).status_code == 200
    assert client.post(reverse("credentials:key_create"), {"agent": support_bot.agent.pk}).status_code == 403
    assert client.post(reverse("credentials:key_revoke", args=[key.pk]), {"reason": "x"}).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None and AgentKey.objects.count() == 1


def test_another_projects_keys_and_agents_are_404(client, support_bot, other_project):
    client.force_login(make_user("gus", "admin", other_project))
    key = AgentKey.objects.get(agent=support_bot.agent)

    assert client.post(reverse("credentials:key_revoke", args=[key.pk]), {"reason": "x"}).status_code == 404
    assert client.post(reverse("credentials:key_create"), {"agent": support_bot.agent.pk}).status_code == 404
    assert key.prefix not in client.get(reverse("credentials:list")).content.decode()
    assert AgentKey.objects.count() == 1


def test_a_user_creates_and_revokes_their_own_token(client, reviewer, project):
    client.force_login(reviewer)

    response = client.post(reverse("credentials:token_create"), {"name": "ci"})

    assert response.status_code == 201
    secret = secret_in(response.content.decode())
    token = PersonalAccessToken.objects.get(user=reviewer, name="ci")
    api = bearer(secret)
    assert api.get("/api/v1/admin/audit").status_code == 200
    client.post(reverse("credentials:token_revoke", args=[token.pk]), {"reason": "rotating"})
    assert api.get("/api/v1/admin/audit").status_code == 401


def test_htmx_create_swaps_only_the_panel(client, reviewer):
    client.force_login(reviewer)
    html = client.post(reverse("credentials:token_create"), {"name": "ci"}, **HTMX).content.decode()
    assert html.lstrip().startswith('<div id="keys-panel"')
    assert "<html" not in html
    secret_in(html)


def test_a_colleagues_tokens_are_invisible_and_403_without_the_admin_role(client, reviewer, second_reviewer):
    client.force_login(second_reviewer)
    client.post(reverse("credentials:token_create"), {"name": "sams"})
    theirs = PersonalAccessToken.objects.get(user=second_reviewer)
    client.force_login(reviewer)

    assert theirs.prefix not in client.get(reverse("credentials:list")).content.decode()
    # Same project, but a reviewer is not its admin: refused, not hidden.
    assert (
        client.post(reverse("credentials:token_revoke", args=[theirs.pk]), {"reason": "x"}).status_code == 403
    )
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_auditors_are_read_only_here_too(client, auditor, support_bot):
    client.force_login(auditor)
    html = client.get(reverse("credentials:list")).content.decode()
    assert "Create token" not in html and "Create agent key" not in html

    assert client.post(reverse("credentials:token_create"), {"name": "mine"}).status_code == 403
    assert client.post(reverse("credentials:key_create"), {"agent": support_bot.agent.pk}).status_code == 403
    assert not PersonalAccessToken.objects.filter(user=auditor).exists()


def test_labels_are_rendered_as_inert_text(ada, support_bot):
    hostile = '<img src=x onerror="alert(1)">'
    ada.post(
        reverse("credentials:key_create"), {"agent": support_bot.agent.pk, "name": hostile, "scopes": "read"}
    )
    assert assert_inert(ada.get(reverse("credentials:list")).content.decode()) >= 1


def test_an_admin_sets_what_an_agent_may_claim_and_it_is_audited(project, support_bot):
    from django.test import Client

    from governance.models import AuditEntry
    from tests.personas import make_user

    admin = Client()
    admin.force_login(make_user("ada", "admin", project))
    url = reverse("credentials:agent_sources", args=[support_bot.agent.pk])
    page = admin.get(reverse("credentials:list")).content.decode()
    assert 'id="agent-sources"' in page
    assert 'name="sources" value="reviewer"' not in page

    # A crafted request for reviewer provenance changes nothing.
    admin.post(url, {"sources": ["user_statement", "reviewer"], "reason": "Let it review"})
    support_bot.agent.refresh_from_db()
    assert support_bot.agent.allowed_source_types == []

    response = admin.post(
        url, {"sources": ["user_statement"], "config_source": "on", "reason": "Syncs CI config"}
    )

    assert response.status_code == 302
    support_bot.agent.refresh_from_db()
    assert support_bot.agent.allowed_source_types == ["user_statement"]
    assert support_bot.agent.is_config_source
    entry = AuditEntry.objects.get(action="agent.sources_changed")
    assert entry.data["after"] == {"allowed_source_types": ["user_statement"], "is_config_source": True}


def test_a_reviewer_cannot_change_what_an_agent_may_claim(project, support_bot, reviewer):
    from django.test import Client

    client = Client()
    client.force_login(reviewer)
    url = reverse("credentials:agent_sources", args=[support_bot.agent.pk])
    assert client.post(url, {"sources": ["config"], "config_source": "on"}).status_code == 403
    support_bot.agent.refresh_from_db()
    assert not support_bot.agent.is_config_source
