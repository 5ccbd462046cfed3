"""Two database roles: the owner runs migrations, the application owns nothing.

``settings.DATABASE_OWNER`` holds the owner's connection settings (user,
password and, for an external server, host, port and options; never another
database). ``manage.py migrate`` switches to them for its own run
(``governance/management/commands/migrate.py``); everything else connects as
the application role of ``DATABASES``. See docs/operations.md, "Database roles".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connections


def owner_settings() -> dict[str, Any] | None:
    owner: dict[str, Any] | None = getattr(settings, "DATABASE_OWNER", None)
    return owner or None


@contextmanager
def as_owner(alias: str = "default") -> Iterator[None]:
    """Connect ``alias`` as the owner role for the duration; then as the application again.

    Without owner settings (one DATABASE_URL), nothing changes: the one role
    does everything, and a system check says least privilege is not in force.
    """
    owner = owner_settings()
    if owner is None:
        yield
        return
    connection = connections[alias]
    if connection.in_atomic_block:
        raise RuntimeError("Cannot switch to the owner role inside a transaction.")
    connection.close()
    saved = {key: connection.settings_dict.get(key) for key in owner}
    connection.settings_dict.update(owner)
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)
