"""The home page: what needs attention, per project the user belongs to."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.personas import FactFactory

pytestmark = pytest.mark.django_db


def test_home_shows_queue_and_usage_metrics_of_my_projects_only(
    client, reviewer, support_bot, outsider_bot, django_assert_max_num_queries
):
    now = timezone.now().isoformat()
    for statement in ("Prefers tea", "Prefers email over phone"):
        support_bot.client.post(
            "/api/v1/writes",
            {
                "principal": "alice",
                "kind": "preference",
                "statement": statement,
                "source": {"type": "chat_message", "ref": "slack:1", "observed_at": now},
            },
            format="json",
        )
    FactFactory.create(project=support_bot.agent.project, authority=1, statement="A rumour")
    support_bot.client.post(
        "/api/v1/retrieve", {"principal": "alice", "query": "", "identity_verified": True}, format="json"
    )
    client.force_login(reviewer)
    with django_assert_max_num_queries(12):
        body = client.get("/").content.decode()
    assert "ACME Corp" in body and "Globex" not in body
    assert '?status=pending_review">2</a>' in body
    assert 'reason=below_authority"' in body


def test_console_requires_login_and_shows_home(client, reviewer):
    assert client.get("/").status_code == 302
    client.force_login(reviewer)
    page = client.get("/")
    assert page.status_code == 200
    assert b"ACME Corp" in page.content
