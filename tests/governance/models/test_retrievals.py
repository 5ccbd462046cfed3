"""models.retrievals: an event's candidates and fact ids go to the database as sent, typed once."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from psycopg.types.numeric import Int8

from governance.models import RetrievalEvent
from governance.rules.seals import EncodedCandidates
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def test_fact_ids_are_typed_without_a_trip_through_the_base_field(monkeypatch: pytest.MonkeyPatch) -> None:
    field = RetrievalEvent._meta.get_field("candidate_fact_ids")
    calls: list[Any] = []
    monkeypatch.setattr(field.base_field, "get_db_prep_value", lambda *a, **k: calls.append(a))
    sent = field.get_db_prep_save([1, 2**40, 3], connection)
    assert sent == [1, 2**40, 3] and all(type(v) is Int8 for v in sent)
    assert calls == []


def test_encoded_candidates_are_sent_as_their_text() -> None:
    field = RetrievalEvent._meta.get_field("candidate_data")
    encoded = EncodedCandidates([[5, None, 1, "recent", 0, 0, 12, 0.5, 1.0, 0.8, 0.7]])
    sent = field.get_db_prep_save(encoded, connection)
    assert sent.dumps(sent.obj) == encoded.json


def test_a_stored_event_reads_back_its_candidates_and_ids(support_bot: AgentPersona) -> None:
    support_bot.write("Prefers tea", kind="preference")
    answer = support_bot.retrieve("s-1", round=1)
    event = RetrievalEvent.objects.get(pk=answer["retrieval_id"])
    assert event.candidate_fact_ids == [row[0] for row in event.candidate_data]
    assert event.selected_fact_ids == [row[0] for row in event.candidate_data if row[1] is None]
    assert event.candidates[0].scores.keys() == {"relevance", "freshness", "confidence", "total"}
