"""Tests that run migrations forwards and backwards do it as ``migrate`` does: as the owner role."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memoryadmin.database_roles import as_owner


@pytest.fixture
def migrating_as_owner(transactional_db: Any) -> Iterator[None]:
    """The application's role may not create, alter or drop tables; the owner's may.

    Whatever the test did, the schema is migrated forward again afterwards: a test
    that failed half-way back would otherwise leave it to the next test of its
    process (a real worker's task then met a missing column).
    """
    with as_owner():
        try:
            yield
        finally:
            executor = MigrationExecutor(connection)
            executor.migrate(executor.loader.graph.leaf_nodes())
