"""Server-side prepared statements for the reads that take longer to plan than to run (issue 13).

A retrieval's header and candidate read, and a write's look-ups: for a
principal of a few facts, ~0.8-1.5 ms of planning each against ~0.2-0.5 ms of
execution (docs/performance.md, "Prepared statements" and "Writes: the
write's look-ups prepared"). The agent key's look-up, which every agent
request sends, for the same reason on a smaller scale. Django's client-side
binding sends every statement as text, so every retrieval and every write
planned them again.
Here each of those statements is prepared once per database connection and
then run as ``EXECUTE name(values)``, through Django's cursor like any
statement: the row-level-security wrapper still sets the project scope in
front of it (the names start with ``NAME_PREFIX``, which
``rls.SCOPED`` lists), the statement is logged and counted once, and errors
are Django's. After five executions PostgreSQL keeps a generic plan when it
is no costlier than the custom ones, and planning drops out. A statement is
prepared again as its use on a connection doubles (REPREPARE_FROM), so that
its generic plan follows tables that grow.

A prepared statement belongs to the server session, so this is off where a
connection is not one session: behind PgBouncer in transaction mode
(``DATABASE_PGBOUNCER``, which marks its connections with
``DISABLE_SERVER_SIDE_CURSORS``), or with ``DATABASE_PREPARED_STATEMENTS=0``;
the statement is then sent as written, as before.

What this module knows about a connection is what it sent on it. A PREPARE
is not undone by a rollback, and a string that failed may or may not have
prepared its statement, so after any error in a prepared read (a lock
timeout, a cancelled statement, a plan gone stale after a migration) that
knowledge is dropped: the next use deallocates every prepared statement of
the connection in front of its own PREPARE.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

NAME_PREFIX = "governance_prepared_"
# Statements prepared on one connection at most; past it, statements are sent
# as written. The retrieval has a handful of variants (``header_statement``,
# ``candidate_statement``) and a write's look-ups one per shape (which
# sub-queries, a principal or a session or none: a dozen or so in use), so the
# cap only bounds a mistake. Each costs the server session 100-200 kB.
MAX_PER_CONNECTION = 64

# A placeholder as Django and psycopg write it: %(name)s, %s, or a literal %%.
_PLACEHOLDER = re.compile(r"%%|%\(([^)]+)\)s|%s")


@dataclass(frozen=True)
class Statement:
    """One statement as PREPARE wants it, and how to pass its values to EXECUTE."""

    name: str
    text: str  # the statement with $1, $2, ... for its placeholders
    names: tuple[str, ...] | None  # the mapping's keys in parameter order; None for positional
    count: int  # how many parameters

    def call(self) -> str:
        """The EXECUTE, with a placeholder for each value."""
        if not self.count:
            return f"EXECUTE {self.name}"
        return f"EXECUTE {self.name}({', '.join(['%s'] * self.count)})"

    def values(self, params: Mapping[str, Any] | Sequence[Any]) -> list[Any]:
        if self.names is not None:
            assert isinstance(params, Mapping), "a statement with named placeholders takes a mapping"
            return [params[name] for name in self.names]
        assert not isinstance(params, Mapping), "a statement with %s placeholders takes a sequence"
        assert len(params) == self.count, f"{self.count} values expected, {len(params)} given"
        return list(params)


@functools.lru_cache(maxsize=256)
def compile_statement(sql: str) -> Statement:
    """``sql`` with its placeholders numbered; one name per distinct text.

    A statement mixes no named and positional placeholders (psycopg refuses
    that too); a name used twice is one parameter.
    """
    named: dict[str, int] = {}
    positional = 0

    def number(match: re.Match[str]) -> str:
        nonlocal positional
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is not None:
            if positional:
                raise ValueError("named and positional placeholders in one statement")
            return f"${named.setdefault(match.group(1), len(named) + 1)}"
        if named:
            raise ValueError("named and positional placeholders in one statement")
        positional += 1
        return f"${positional}"

    text = _PLACEHOLDER.sub(number, sql)
    digest = hashlib.blake2b(sql.encode(), digest_size=10).hexdigest()
    return Statement(
        name=f"{NAME_PREFIX}{digest}",
        text=text,
        names=tuple(named) if named else None,
        count=len(named) or positional,
    )


# A statement is prepared again when its uses on a connection reach 64, 128,
# 256 and so on. A generic plan is made from the tables as they were: one made
# while a table was nearly empty (sessions and start blocks on a new database)
# read it whole, so a later round's header went from 1 to 10 ms over its first
# 200 uses, until an ANALYZE would have invalidated it. Planned again as its
# use doubles, a plan follows tables that grow with that use, at the cost of
# a few custom plans each time (docs/performance.md, "Prepared statements").
REPREPARE_FROM = 64

# Per raw psycopg connection: how often each name has been used on it (the
# count goes on through a re-prepare), or None when an error left that
# unknown. A new connection (Django reconnecting) starts empty.
_prepared: weakref.WeakKeyDictionary[Any, dict[str, int] | None] = weakref.WeakKeyDictionary()


def _plan_again(uses: int) -> bool:
    """Whether the next use prepares the statement again: at REPREPARE_FROM uses, then each doubling."""
    return uses >= REPREPARE_FROM and uses & (uses - 1) == 0


def enabled(connection: Any) -> bool:
    """Whether statements are prepared on this Django connection (see the module's note)."""
    return (
        connection.vendor == "postgresql"
        and bool(getattr(settings, "DATABASE_PREPARED_STATEMENTS", True))
        and not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    )


def execute(cursor: Any, sql: str, params: Mapping[str, Any] | Sequence[Any]) -> None:
    """``cursor.execute(sql, params)``, through a statement prepared on the connection where it may be.

    One statement for Django either way (one execute, one entry in its log and
    counts, the project scope set in front by ``rls``): the first use on a
    connection sends ``PREPARE name AS ...; EXECUTE name(...)`` as one query
    string, later ones ``EXECUTE name(...)``.
    """
    connection = cursor.db
    if not enabled(connection):
        cursor.execute(sql, params)
        return
    statement = compile_statement(sql)
    raw = connection.connection
    known = _prepared.get(raw, {})
    names = {} if known is None else known
    uses = names.get(statement.name)
    if uses is not None and not _plan_again(uses):
        text = statement.call()
        names[statement.name] = uses + 1
    elif uses is None and len(names) >= MAX_PER_CONNECTION:
        cursor.execute(sql, params)
        return
    else:
        # After an error, what is prepared is unknown: start again from nothing;
        # a statement to plan again goes first.
        reset = (
            "DEALLOCATE ALL; " if known is None else "" if uses is None else f"DEALLOCATE {statement.name}; "
        )
        # A literal % of the statement is doubled: the string goes with values.
        body = statement.text.replace("%", "%%")
        text = f"{reset}PREPARE {statement.name} AS {body}; {statement.call()}"
        names[statement.name] = (uses or 0) + 1
    _prepared[raw] = None  # unknown until the string has run
    cursor.execute(text, statement.values(params))
    # The statement's own result is the last one (``rls`` may also have put its setting in front).
    while cursor.nextset():
        pass
    _prepared[raw] = names


def prepared_on(connection: Any) -> frozenset[str]:
    """The names this module has prepared on ``connection`` (for tests and diagnostics)."""
    raw = connection.connection
    names = _prepared.get(raw) if raw is not None else None
    return frozenset(names or ())
