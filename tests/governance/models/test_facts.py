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
