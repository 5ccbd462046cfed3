"""Scoped agent keys (issue 12 item 5): read, write and forget, each refused by name when missing."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import URLPattern, get_resolver
from rest_framework.test import APIClient

from governance.api.auth import HasKeyScope
from governance.api.base import AgentAPIView
from governance.context import actor_scope
from governance.models import AgentKey, AuditEntry, Fact
from governance.services import credentials
from tests.governance.policy_helpers import write
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def key_with(bot: AgentPersona, *scopes: str) -> APIClient:
    with actor_scope("test"):
        _, secret = credentials.create_agent_key(bot.agent, scopes=scopes)
    client = APIClient()
    client.default_format = "json"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def new_write(client: APIClient, statement: str = "Prefers tea over coffee") -> Any:
    return client.post(
        "/api/v1/writes",
        {
            "principal": "alice",
            "kind": "preference",
            "statement": statement,
            "source": {"type": "user_statement", "ref": "chat:1", "observed_at": "2026-01-01T00:00:00Z"},
        },
        format="json",
    )


def assert_missing(response: Any, scope: str) -> None:
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "missing_scope"
    assert error["fields"] == {"scope": [scope]}
    assert f"'{scope}' scope" in error["message"]


def test_a_new_key_may_do_everything_unless_narrowed(support_bot):
    key = AgentKey.objects.get(agent=support_bot.agent)
    assert key.scopes == ["read", "write", "forget"]
    with actor_scope("test"):
        narrowed, _ = credentials.create_agent_key(support_bot.agent, scopes=["write", "read"])
    assert narrowed.scopes == ["read", "write"]
    entry = AuditEntry.objects.filter(action="agent_key.created").latest("id")
    assert entry.data["scopes"] == ["read", "write"]


def test_a_read_only_key_retrieves_but_cannot_write_end_sessions_or_withdraw(support_bot):
    fact_id = write(support_bot, "Prefers tea over coffee")["fact"]["id"]
    reader = key_with(support_bot, "read")

    retrieved = reader.post(
        "/api/v1/retrieve", {"principal": "alice", "query": "", "round": 1, "identity_verified": True}
    )
    assert retrieved.status_code == 200, retrieved.content
    assert reader.get(f"/api/v1/facts/{fact_id}").status_code == 200
    assert reader.get("/api/v1/principals/alice/memories").status_code == 200

    assert_missing(new_write(reader, "Lives in Lisbon"), "write")
    ended = reader.post(
        "/api/v1/sessions/s1/end",
        {"principal": "alice", "summary": "", "resume_hint": "", "first_event": "e1", "last_event": "e2"},
    )
    assert_missing(ended, "write")
    withdrawn = reader.post(f"/api/v1/facts/{fact_id}/withdraw", {"reason": "asked", "principal": "alice"})
    assert_missing(withdrawn, "forget")
    assert Fact.objects.get(pk=fact_id).status == "active"
    assert not Fact.objects.filter(statement="Lives in Lisbon").exists()


def test_a_write_only_key_cannot_read(support_bot):
    writer = key_with(support_bot, "write")
    created = new_write(writer)
    assert created.status_code == 201, created.content
    assert_missing(writer.get(f"/api/v1/writes/{created.json()['id']}"), "read")
    assert_missing(writer.get(f"/api/v1/facts/{created.json()['fact']['id']}"), "read")
    assert_missing(writer.get("/api/v1/principals/alice/memories"), "read")
    assert_missing(writer.post("/api/v1/retrieve", {"principal": "alice", "round": 1}), "read")


def test_withdrawal_needs_forget_and_a_forget_key_withdraws(support_bot):
    fact_id = write(support_bot, "Prefers tea over coffee")["fact"]["id"]
    assert_missing(
        key_with(support_bot, "read", "write").post(
            f"/api/v1/facts/{fact_id}/withdraw", {"reason": "asked", "principal": "alice"}
        ),
        "forget",
    )
    forgetter = key_with(support_bot, "forget")
    response = forgetter.post(f"/api/v1/facts/{fact_id}/withdraw", {"reason": "asked", "principal": "alice"})
    assert response.status_code == 200, response.content
    assert Fact.objects.get(pk=fact_id).status == "withdrawn"


def _agent_views() -> list[type[AgentAPIView]]:
    views = []
    for pattern in get_resolver("governance.api.urls").url_patterns:
        assert isinstance(pattern, URLPattern)
        view = getattr(pattern.callback, "view_class", None)
        if view is not None and issubclass(view, AgentAPIView):
            views.append(view)
    return views


SCOPE_FREE = {"KeyInfo"}


def test_every_agent_operation_declares_the_scope_it_needs():
    views = _agent_views()
    names = {view.__name__ for view in views}
    # The operations of version 1 are among them (the list grows with the API).
    assert {"WriteListCreate", "Retrieve", "FactWithdraw", "EndSession", "PrincipalMemories"} <= names
    for view in views:
        if HasKeyScope not in view.permission_classes:
            # Deliberately open to every valid key (GET /api/v1/key: what the key itself is).
            assert view.__name__ in SCOPE_FREE, view.__name__
            continue
        methods = {
            m.upper() for m in view.http_method_names if hasattr(view, m) and m not in {"options", "head"}
        }
        assert set(view.scopes) == methods, view.__name__
        for scope, action in view.scopes.values():
            assert scope in {"read", "write", "forget"} and action


def test_create_agent_key_narrows_scopes_and_refuses_unknown_ones(db):
    err = StringIO()
    call_command(
        "create_agent_key", "acme", "reader-bot", "--scopes", "read,write", stdout=StringIO(), stderr=err
    )
    assert AgentKey.objects.get(agent__slug="reader-bot").scopes == ["read", "write"]
    assert "scopes read, write" in err.getvalue()

    with pytest.raises(CommandError, match="Unknown scope delete"):
        call_command("create_agent_key", "newproject", "bot", "--scopes", "read,delete", stdout=StringIO())
    from governance.models import Project

    assert not Project.objects.filter(slug="newproject").exists()
