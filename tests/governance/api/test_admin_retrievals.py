"""GET /api/v1/admin/retrievals: the auditors' retrieval listing (docs/api.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from governance.models import Principal, Session
from tests.personas import make_retrieval_event, make_user, token_client

pytestmark = pytest.mark.django_db

URL = "/api/v1/admin/retrievals"


@pytest.fixture
def events(project, support_bot):
    alice = Principal.objects.create(project=project, external_id="alice")
    bob = Principal.objects.create(project=project, external_id="bob")
    session = Session.objects.create(
        project=project, agent=support_bot.agent, principal=alice, external_id="s-1"
    )
    now = timezone.now()
    return [
        make_retrieval_event(
            support_bot.agent,
            principal=alice if i % 2 else bob,
            session=session if i == 1 else None,
            reasons=["stale"] if i % 3 == 0 else [],
            context=f"- fact {i}",
            # Pairs share a timestamp: the id must break the tie.
            created_at=now - timedelta(minutes=i // 2),
        )
        for i in range(7)
    ]


def newest_first(events):
    return [e.pk for e in sorted(events, key=lambda e: (e.created_at, e.pk), reverse=True)]


def test_auditor_pages_through_the_log_with_the_next_cursor(auditor, events):
    client = token_client(auditor)
    seen: list[int] = []
    url: str | None = f"{URL}?limit=3"
    pages = 0
    while url:
        response = client.get(url)
        assert response.status_code == 200
        body = response.json()
        seen += [row["id"] for row in body["results"]]
        pages += 1
        assert pages < 10, "the cursor must advance"
        url = f"{URL}?limit=3&cursor={body['next']}" if body["next"] else None
    assert seen == newest_first(events)
    assert pages == 3


def test_each_result_names_what_an_auditor_needs(auditor, events):
    body = token_client(auditor).get(URL, {"session": "s-1"}).json()
    assert body["next"] is None
    [row] = body["results"]
    event = events[1]
    assert row == {
        "id": event.pk,
        "project": "acme",
        "agent": "support-bot",
        "principal": "alice",
        "session": "s-1",
        "round": 1,
        "mode": "resume",
        "identity_verified": False,
        "policy_version": 1,
        "query": "",
        "context": "- fact 1",
        "tokens_used": 0,
        "token_budget": 600,
        "candidates": 0,
        "excluded": 0,
        "reasons": [],
        "static_block_cached": False,
        "created_at": event.created_at.isoformat(),
    }


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"reason": "stale"}, [0, 3, 6]),
        ({"principal": "alice"}, [1, 3, 5]),
        ({"principal": "alice", "reason": "stale"}, [3]),
        ({"agent": "support-bot", "principal": "carol"}, []),
        ({"agent": "no-such-bot"}, []),
    ],
)
def test_filters(auditor, events, params, expected):
    body = token_client(auditor).get(URL, params).json()
    assert [row["id"] for row in body["results"]] == newest_first([events[i] for i in expected])


def test_since_is_inclusive(auditor, events):
    since = events[4].created_at.isoformat()
    body = token_client(auditor).get(URL, {"since": since}).json()
    assert [row["id"] for row in body["results"]] == newest_first(events[:6])


def test_scoped_to_the_token_users_projects(outsider, events, outsider_bot):
    theirs = make_retrieval_event(outsider_bot.agent)
    body = token_client(outsider).get(URL).json()
    assert [row["id"] for row in body["results"]] == [theirs.pk]
    assert token_client(outsider).get(URL, {"principal": "alice"}).json() == {"results": [], "next": None}


@pytest.mark.parametrize("persona", ["reviewer", "policy_editor", "auditor"])
def test_every_console_role_can_read(request, persona, events):
    user = request.getfixturevalue(persona)
    assert len(token_client(user).get(URL).json()["results"]) == 7


def test_a_user_without_a_membership_is_refused(project, events):
    user = make_user("nobody", None, project)
    response = token_client(user).get(URL)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_agent_keys_and_anonymous_callers_are_unauthenticated(support_bot, events):
    assert support_bot.client.get(URL).status_code == 401
    response = APIClient().get(URL)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"reason": "because"}, "reason"),
        ({"since": "yesterday"}, "since"),
        ({"limit": "0"}, "limit"),
        ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
    ],
)
def test_bad_parameters_answer_400_with_the_field(auditor, events, params, field):
    response = token_client(auditor).get(URL, params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == [field]
