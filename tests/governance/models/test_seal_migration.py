"""Migration 0017 seals the retrieval events stored before seals existed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from governance.models import RetrievalEvent
from governance.services import checkpoints
from tests.personas import make_retrieval_event

BEFORE = [("governance", "0016_retrieval_seals_and_checkpoint_coverage")]
AFTER = [("governance", "0017_seal_existing_retrievals")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_unsealed_events_are_sealed_as_they_are(support_bot: Any) -> None:
    old = make_retrieval_event(support_bot.agent, query="bikes", context="Owns 3 bicycles", context_seal="")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)  # 0017 unapplied; it has nothing to undo

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    # Sealed by 0017, and re-sealed by 0029_b once the seal came to cover the candidates.
    event = RetrievalEvent.objects.get(pk=old.pk)
    assert event.context_seal == checkpoints.seal_retrieval(
        event.project_id, event.agent_id, event.created_at, "bikes", "Owns 3 bicycles", []
    )
