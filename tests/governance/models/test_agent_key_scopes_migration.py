"""Migration 0013 gives keys made before scopes existed every scope, so they keep working."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("governance", "0018_session_resume_hint_held")]
AFTER = [("governance", "0019_agent_key_scopes")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_existing_keys_get_every_scope():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    project = old.get_model("governance", "Project").objects.create(slug="acme", name="ACME")
    agent = old.get_model("governance", "Agent").objects.create(project=project, slug="support-bot")
    old.get_model("governance", "AgentKey").objects.create(agent=agent, prefix="abc123", digest="0" * 64)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    key = new.get_model("governance", "AgentKey").objects.get(prefix="abc123")
    assert key.scopes == ["read", "write", "forget"]

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
