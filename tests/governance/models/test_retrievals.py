"""models.retrievals: an event's candidates and fact ids go to the database as sent, made once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from governance.models import RetrievalEvent, retrievals
from governance.models.retrievals import SixPlaces, encode_candidate
from governance.rules.seals import EncodedCandidates
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def test_fact_ids_are_sent_as_the_arrays_text_without_a_trip_through_the_base_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    field = RetrievalEvent._meta.get_field("candidate_fact_ids")
    calls: list[Any] = []
    monkeypatch.setattr(field.base_field, "get_db_prep_value", lambda *a, **k: calls.append(a))
    assert field.get_db_prep_save([1, 2**40, 3], connection) == "{1,1099511627776,3}"
    assert field.get_db_prep_save([], connection) == "{}"
    assert calls == []


def test_fact_ids_text_is_the_array_the_column_stores() -> None:
    field = RetrievalEvent._meta.get_field("candidate_fact_ids")
    with connection.cursor() as cursor:
        for ids in ([1, 2**40, 3], [7], []):
            cursor.execute("SELECT %s::bigint[]", [field.get_db_prep_save(ids, connection)])
            assert cursor.fetchone()[0] == ids


def test_anything_but_a_list_of_ints_goes_through_the_base_field() -> None:
    field = RetrievalEvent._meta.get_field("candidate_fact_ids")
    assert field.get_db_prep_save([True, 2], connection) == [True, 2]
    assert field.get_db_prep_save((1, 2), connection) == [1, 2]


def test_six_places_rounds_as_round_does() -> None:
    six_places = SixPlaces()
    for value in (0.1234565, 0.0, -0.0, -1e-9, 1, True, 2.5e-7, 1 / 3, 0.5**0.1, float("inf")):
        expected = round(float(value), 6) + 0.0
        assert repr(six_places[value]) == repr(expected), value
    assert repr(six_places[-0.0]) == repr(six_places[-1e-9]) == "0.0"


def test_six_places_rounds_a_repeated_value_once(monkeypatch: pytest.MonkeyPatch) -> None:
    rounded: list[float] = []

    def counting(value: float, places: int) -> float:
        rounded.append(value)
        return round(value, places)

    monkeypatch.setattr(retrievals, "round", counting, raising=False)
    six_places = SixPlaces()
    assert [six_places[v] for v in (0.25, 0.1234567, 0.25, 0.1234567, 0.25)] == [0.25, 0.123457] * 2 + [0.25]
    assert rounded == [0.25, 0.1234567]


def test_candidates_sharing_six_places_encode_as_each_alone() -> None:
    six_places = SixPlaces()
    rows = [
        (1, "selected", None, 1, "recent", 3, False, 40, {"relevance": 0.41234567, "freshness": 0.5**0.1}),
        (2, "excluded", "stale", None, None, 90, True, 0, {"freshness": 0.5**0.1, "total": -0.0}),
        (3, "excluded", "low_relevance", None, "recent", 3, True, 0, {"relevance": 0.41234567}),
    ]
    shared = [encode_candidate(*row, six_places=six_places) for row in rows]
    assert json.dumps(shared) == json.dumps([encode_candidate(*row) for row in rows])
    assert shared[1][7:] == [0.0, 0.933033, 0.0, 0.0]


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
