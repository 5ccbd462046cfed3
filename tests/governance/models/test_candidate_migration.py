"""Migration 0029 moves candidate rows into their event's row and re-seals the event (issue 13)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from governance.models import Fact, RetrievalEvent
from governance.services import checkpoints
from tests.governance.review_helpers import propose
from tests.personas import make_retrieval_event

BEFORE = [("governance", "0028_change_feed")]


def _migrate(targets: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_candidate_rows_become_the_events_document_and_back(support_bot: Any) -> None:
    kept = propose(support_bot, "Prefers dark mode", principal="dana", source_type="user_statement").fact
    dropped = propose(support_bot, "Lives in Lisbon", principal="dana", source_type="user_statement").fact
    assert isinstance(kept, Fact) and isinstance(dropped, Fact)
    event = make_retrieval_event(support_bot.agent, query="theme", context="- Prefers dark mode")
    tampered = make_retrieval_event(support_bot.agent, query="x", context="y", context_seal="0" * 64)
    _migrate(BEFORE)
    stale_scores = {"relevance": 0.5, "freshness": 0.25, "confidence": 0.8, "total": 0.46}
    kept_scores = {"relevance": 0.9, "freshness": 0.95, "confidence": 0.8, "total": 0.89}
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO governance_retrievalcandidate "
            "(event_id, fact_id, decision, reason, rank, tier, age_days, per_round, scores, tokens) VALUES "
            "(%s, %s, 'excluded', 'stale', NULL, NULL, 40, false, %s::jsonb, 6), "
            "(%s, %s, 'selected', NULL, 1, 'recent', 2, true, %s::jsonb, 7)",
            [event.pk, dropped.pk, json.dumps(stale_scores), event.pk, kept.pk, json.dumps(kept_scores)],
        )

    _migrate()

    moved = RetrievalEvent.objects.get(pk=event.pk)
    assert moved.candidate_fact_ids == [dropped.pk, kept.pk]
    assert moved.selected_fact_ids == [kept.pk]
    [stale, selected] = moved.candidates
    assert (stale.decision, stale.reason, stale.age_days, stale.tokens) == ("excluded", "stale", 40, 6)
    assert stale.scores == stale_scores
    assert (selected.decision, selected.rank, selected.tier, selected.per_round, selected.scores) == (
        "selected",
        1,
        "recent",
        True,
        kept_scores,
    )
    # Re-sealed over its candidates; the event whose seal was already wrong stays wrong.
    assert moved.context_seal == checkpoints.seal_retrieval(
        moved.project_id,
        moved.agent_id,
        moved.created_at,
        "theme",
        "- Prefers dark mode",
        moved.candidate_data,
    )
    assert RetrievalEvent.objects.get(pk=tampered.pk).context_seal == "0" * 64

    _migrate(BEFORE)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT fact_id, decision, reason, rank FROM governance_retrievalcandidate "
            "WHERE event_id = %s ORDER BY id",
            [event.pk],
        )
        assert cursor.fetchall() == [(dropped.pk, "excluded", "stale", None), (kept.pk, "selected", None, 1)]
    _migrate()
