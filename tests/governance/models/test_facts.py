"""The fact table on the embedded PostgreSQL: pgvector is there and a vector round-trips."""

from __future__ import annotations

import pytest
from django.db import connection

from governance.models import Fact
from tests.personas import FactFactory


@pytest.mark.django_db
def test_embedded_database_runs_pgvector_0_8():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cursor.fetchone()
        cursor.execute("SHOW server_version")
        (server,) = cursor.fetchone()
    assert version.startswith("0.8"), version
    assert int(server.split(".")[0]) >= 15


@pytest.mark.django_db
def test_a_vector_round_trips_through_the_orm(project):
    vector = [0.0] * 384
    vector[0], vector[383] = 0.25, -1.5
    fact = FactFactory.create(project=project, embedding=vector)
    stored = Fact.objects.get(pk=fact.pk).embedding
    assert stored is not None and len(stored) == 384
    assert stored[0] == pytest.approx(0.25) and stored[383] == pytest.approx(-1.5)


@pytest.mark.django_db
def test_a_vector_is_stored_as_the_float4_values_it_was_given() -> None:
    import numpy as np

    from governance.models.facts import vector_text

    rng = np.random.default_rng(7)
    # Doubles with more digits than a float4 holds, awkward magnitudes, and the
    # float4 neighbours of a value, which nine digits must tell apart.
    values = [float(v) for v in rng.normal(0, 0.2, 380)]
    tiny = float(np.float32(1e-38))
    close = float(np.nextafter(np.float32(0.1), np.float32(1)))
    values += [tiny, -3.4e38, close, 0.1]
    expected = np.asarray(values, dtype=np.float32)

    assert np.array_equal(np.array(vector_text(values)[1:-1].split(","), dtype=np.float32), expected)
    fact = FactFactory.create(embedding=values)
    with connection.cursor() as cursor:
        cursor.execute("SELECT embedding::text FROM governance_fact WHERE id = %s", [fact.pk])
        stored = cursor.fetchone()[0]
    assert np.array_equal(np.array(stored[1:-1].split(","), dtype=np.float32), expected)
    assert Fact.objects.get(pk=fact.pk).embedding is not None


@pytest.mark.django_db
def test_a_facts_stored_claims_stay_out_of_its_history(project) -> None:
    from governance.rules.contradictions import stored_claims

    fact = FactFactory.create(project=project, statement="I live in Leeds.")
    history = Fact.pgh_event_model.objects.filter(pgh_obj_id=fact.pk)  # type: ignore[attr-defined]  # pghistory adds it
    assert history.count() == 1
    # Storing them is no change to the fact: history, which the statement's
    # erasure must reach everywhere (R8), gets neither a row nor a copy.
    Fact.objects.filter(pk=fact.pk).update(claims=stored_claims(fact.statement, None))
    assert history.count() == 1
    assert "claims" not in {f.name for f in Fact.pgh_event_model._meta.fields}  # type: ignore[attr-defined]
