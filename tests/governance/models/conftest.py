"""Tests that run migrations forwards and backwards do it as ``migrate`` does: as the owner role."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memoryadmin.database_roles import as_owner


@pytest.fixture
def migrating_as_owner(transactional_db: Any) -> Iterator[None]:
    """The application's role may not create, alter or drop tables; the owner's may."""
    with as_owner():
        yield
