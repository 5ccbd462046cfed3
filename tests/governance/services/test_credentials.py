"""Authenticating an agent key: what is refused, and what a request costs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.context import actor_scope
from governance.models import AgentKey
from governance.services import credentials
from tests.personas import make_agent

pytestmark = pytest.mark.django_db


def test_a_valid_key_is_found_with_its_agent(project):
    bot = make_agent(project, "support-bot")
    key = credentials.authenticate_agent_key(bot.key)
    assert key is not None
    assert key.agent == bot.agent
    assert key.agent.project == project


def test_malformed_unknown_and_wrong_secrets_are_refused(project):
    bot = make_agent(project, "support-bot")
    kind, prefix, tail = bot.key.split("_", 2)
    for secret in (
        "",
        bot.key.replace("mak_", "mpt_", 1),  # a token's kind
        f"{kind}__{tail}",  # no prefix
        f"{kind}_000000000000_{tail}",  # nobody's prefix
        f"{kind}_{prefix}_{tail[:-1]}x" if tail[-1] != "x" else f"{kind}_{prefix}_{tail[:-1]}y",
        f"{kind}_{prefix}_",
    ):
        assert credentials.authenticate_agent_key(secret) is None, secret


def test_a_revoked_key_is_refused_at_once(project):
    bot = make_agent(project, "support-bot")
    assert credentials.authenticate_agent_key(bot.key) is not None
    with actor_scope("test"):
        credentials.revoke_agent_key(AgentKey.objects.get(agent=bot.agent), reason="leaked")
    assert credentials.authenticate_agent_key(bot.key) is None


def test_the_look_up_is_planned_once_per_connection(project):
    """Every agent request authenticates: after its first use on a connection the look-up
    runs as a prepared statement, and the database no longer plans it each time
    (governance.prepared). The revoked key above is refused through it."""
    bot = make_agent(project, "support-bot")
    assert credentials.authenticate_agent_key(bot.key) is not None
    with CaptureQueriesContext(connection) as seen:
        assert credentials.authenticate_agent_key(bot.key) is not None
    (sent,) = [query["sql"] for query in seen.captured_queries]
    assert "EXECUTE governance_prepared_" in sent and "governance_agentkey" not in sent, sent


def test_last_used_is_recorded_to_the_minute_with_one_statement_otherwise(project, django_assert_num_queries):
    bot = make_agent(project, "support-bot")
    with django_assert_num_queries(2):  # the lookup, and the first use recorded
        credentials.authenticate_agent_key(bot.key)
    first = AgentKey.objects.get(agent=bot.agent).last_used_at
    assert first is not None

    with django_assert_num_queries(1):  # within the minute: the lookup only
        key = credentials.authenticate_agent_key(bot.key)
    assert key is not None and key.last_used_at == first

    earlier = timezone.now() - timedelta(minutes=2)
    AgentKey.objects.filter(agent=bot.agent).update(last_used_at=earlier)
    with django_assert_num_queries(2):
        key = credentials.authenticate_agent_key(bot.key)
    assert key is not None and key.last_used_at is not None and key.last_used_at > earlier
    assert AgentKey.objects.get(agent=bot.agent).last_used_at == key.last_used_at
