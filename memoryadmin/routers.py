"""Reads that may be served by a streaming replica (``DATABASE_REPLICA_URL``).

Nothing goes to the replica unless the code asks for it: console pages that
only read (``governance.views.base.replica_reads``), the audit export stream
and the what-if replay's reads enter ``reading_from_replica()``; everything
else (writes, the API, the write guard, a page right after its person's own
POST) keeps reading from the primary. Without ``DATABASE_REPLICA_URL`` there
is no ``replica`` alias and the router answers nothing, so Django routes as
it always did.

Lag policy (docs/operations.md, "Read replica"): a page read from the replica
may show data up to ``DATABASE_REPLICA_MAX_LAG_SECONDS`` old. Entering the
context costs one probe statement that measures the replica's lag; a replica
further behind than that, or one that cannot be reached, is skipped with a
log line, and the reads go to the primary. After a failed connection the
replica is left alone for ``DATABASE_REPLICA_RETRY_SECONDS``, so a replica
that is down does not cost every page a connection timeout.

Row-level security needs nothing here: ``governance.rls`` wraps every
connection, the replica's included, and sets the projects with
``set_config(..., true)`` inside each read transaction.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

logger = logging.getLogger(__name__)

REPLICA = "replica"
PRIMARY = DEFAULT_DB_ALIAS
# Set on the response to a person's POST (governance.middleware.ReadYourWritesMiddleware):
# while it lasts, their pages read from the primary, which has what they just changed.
WROTE_COOKIE = "memoryadmin_wrote"
# Says a response was read from the replica, and the time of the last commit it had replayed.
READ_FROM_HEADER = "X-Read-From"

# Caught up (nothing received is left to replay) counts as no lag: on a quiet
# primary the last replayed commit is old although the replica misses nothing.
LAG_SQL = """
SELECT CASE
         WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
         ELSE COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 0)
       END,
       pg_last_xact_replay_timestamp(),
       pg_is_in_recovery()
"""


@dataclass(frozen=True)
class ReplicaRead:
    """Where a ``reading_from_replica()`` block reads: the replica (and how fresh) or the primary."""

    alias: str
    replayed_at: datetime | None = None

    @property
    def from_replica(self) -> bool:
        return self.alias == REPLICA

    def header(self) -> str:
        """``READ_FROM_HEADER``'s value: ``replica; replayed-at=<ISO time>``."""
        return f"replica; replayed-at={self.replayed_at.isoformat()}" if self.replayed_at else "replica"


_ON_PRIMARY = ReplicaRead(PRIMARY)
_current: ContextVar[ReplicaRead] = ContextVar("memoryadmin_replica_read", default=_ON_PRIMARY)
# Inside reading_from_primary(): a nested reading_from_replica() reads the primary too.
_pinned: ContextVar[bool] = ContextVar("memoryadmin_primary_pinned", default=False)
_down_until = 0.0
# Django wraps driver errors in its own; a statement run on the raw connection
# raises psycopg's unless its caller translates them (governance.rls does).
ERRORS = (DatabaseError, psycopg.Error)


def replica_configured() -> bool:
    # connections.settings, not settings.DATABASES: the replica test adds the alias at run time.
    return REPLICA in connections.settings


def current() -> ReplicaRead:
    return _current.get()


def mark_down(reason: object) -> None:
    """The replica failed: read from the primary for a while, and say so."""
    global _down_until
    retry = float(getattr(settings, "DATABASE_REPLICA_RETRY_SECONDS", 30))
    _down_until = time.monotonic() + retry
    logger.warning("Read replica unavailable (%s); reading from the primary for %.0f s.", reason, retry)
    with contextlib.suppress(*ERRORS):
        connections[REPLICA].close()


def replica_usable() -> bool:
    """Whether the replica still answers (after an error, to tell its failure from the page's own)."""
    try:
        with connections[REPLICA].cursor() as cursor:
            cursor.execute("SELECT 1")
    except ERRORS:
        return False
    return True


def _probe() -> ReplicaRead:
    if not replica_configured() or time.monotonic() < _down_until:
        return _ON_PRIMARY
    connection = connections[REPLICA]
    try:
        # A connection kept from an earlier request may be to a server that has
        # since gone: the probe statement finds out, and the error is caught.
        with connection.cursor() as cursor:
            cursor.execute(LAG_SQL)
            lag, replayed_at, in_recovery = cursor.fetchone()
    except ERRORS as exc:
        mark_down(exc)
        return _ON_PRIMARY
    if not in_recovery:
        # Promoted (or misconfigured to point at a primary): still correct to read from.
        return ReplicaRead(REPLICA, None)
    limit = float(getattr(settings, "DATABASE_REPLICA_MAX_LAG_SECONDS", 10))
    if float(lag) > limit:
        logger.warning("Read replica is %.1f s behind (limit %.0f s); reading from the primary.", lag, limit)
        return _ON_PRIMARY
    return ReplicaRead(REPLICA, replayed_at)


@contextlib.contextmanager
def reading_from_replica(decided: ReplicaRead | None = None) -> Iterator[ReplicaRead]:
    """Reads in the block go to the replica when there is one, it answers, and it is fresh enough.

    Yields where the reads go. Only for work that does not need to see a write
    made a moment ago: a request's own writes are not on the replica yet.
    ``decided`` carries an earlier decision on (a streamed response's rows).
    """
    if current().from_replica or _pinned.get():
        yield current()
        return
    read = decided or _probe()
    token = _current.set(read)
    try:
        yield read
    finally:
        _current.reset(token)


@contextlib.contextmanager
def reading_from_primary() -> Iterator[None]:
    """Reads in the block go to the primary, even where ``reading_from_replica()`` is asked for inside it.

    For reads that must see the latest commit (a person's page right after
    their own change, a job's cancel flag).
    """
    token, pinned = _current.set(_ON_PRIMARY), _pinned.set(True)
    try:
        yield
    finally:
        _pinned.reset(pinned)
        _current.reset(token)


class ReplicaRouter:
    """Marked reads to the replica; all else, and anything inside a primary transaction, to the primary."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if not replica_configured():
            return None
        if current().from_replica and not connections[PRIMARY].in_atomic_block:
            return REPLICA
        # Reads inside a transaction on the primary stay with its writes (and its locks).
        return PRIMARY

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        # Explicit: without an answer Django would write an instance back to the
        # database it was read from, which may be the replica.
        return PRIMARY if replica_configured() else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        both = {obj1._state.db, obj2._state.db}
        return True if both <= {PRIMARY, REPLICA} else None

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        # The replica replays the primary's schema; it never runs migrations itself.
        return False if db == REPLICA else None
