"""The agent key behind a bearer secret: one hand-written statement that must load what the ORM would."""

from __future__ import annotations

from typing import Any

import pytest

from governance.models import Agent, AgentKey
from governance.selectors.credentials import agent_key
from tests.personas import make_agent

pytestmark = pytest.mark.django_db


def _values(instance: Any) -> dict[str, Any]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def _types(instance: Any) -> dict[str, type]:
    return {name: type(value) for name, value in _values(instance).items()}


def test_the_key_comes_with_its_agent_project_and_policy_as_the_orm_loads_them(
    project, django_assert_num_queries
):
    bot = make_agent(project, "support-bot", token_budget=321, min_relevance=0.25)
    stored = AgentKey.objects.select_related("agent__project", "agent__active_policy").get(agent=bot.agent)

    with django_assert_num_queries(1):
        key = agent_key(stored.prefix)
        assert key is not None
        # Everything authentication and the views read, without another statement.
        assert key.agent.project.slug == project.slug
        assert key.agent.active_policy is not None
        assert key.agent.active_policy.settings["token_budget"] == 321

    for ours, orms in (
        (key, stored),
        (key.agent, stored.agent),
        (key.agent.project, stored.agent.project),
        (key.agent.active_policy, stored.agent.active_policy),
    ):
        assert type(ours) is type(orms)
        assert _values(ours) == _values(orms)
        # Same Python types too: parsed JSON, lists, aware datetimes.
        assert _types(ours) == _types(orms)
        assert ours._state.adding is False and ours._state.db == "default"
    assert key.scopes == ["read", "write", "forget"]


def test_an_agent_without_an_active_policy_has_none_loaded(project, django_assert_num_queries):
    bot = make_agent(project, "support-bot")
    Agent.objects.filter(pk=bot.agent.pk).update(active_policy=None)
    prefix = AgentKey.objects.get(agent=bot.agent).prefix

    with django_assert_num_queries(1):
        key = agent_key(prefix)
        assert key is not None
        assert key.agent.active_policy is None


def test_an_unknown_prefix_finds_nothing(project):
    make_agent(project, "support-bot")
    assert agent_key("000000000000") is None
    assert agent_key("") is None
    # The prefix is a bound parameter, never SQL.
    assert agent_key("' OR ''='") is None
