"""Row-level security by project: the database's second line behind the application's checks.

Facts, writes, retrieval events and audit entries carry row-level security
policies (migration 0024_c_row_level_security): the application role sees and
writes only rows whose project is listed in the ``memoryadmin.projects``
setting of the current transaction, or every row when it says ``all``. Unset,
it sees nothing. The owner role (migrations, the SECURITY DEFINER erasure
function) is not subject to the policies.

The setting is local to a transaction (``set_config(..., true)``), applied by a
connection execute wrapper at the start of each transaction that touches
those tables, so nothing carries over between transactions: safe behind
PgBouncer in transaction mode. Which projects, comes from the scope of the
current context:

- a web request starts with none (``ProjectScopeMiddleware``); signing in
  widens it to the person's projects (their memberships), an agent key to its
  project, a personal access token to its person's projects;
- everything else (Celery tasks, management commands, the demo loader,
  ``verify_audit``) is system work and sees every project, as does the audit
  writer, which must see the head of a chain to append to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from psycopg.pq import TransactionStatus

from governance.prepared import NAME_PREFIX as PREPARED_NAME_PREFIX

SETTING = "memoryadmin.projects"
EVERY_PROJECT = "all"
# The tables under a policy; a statement that names none of them cannot read them.
TABLES = ("governance_fact", "governance_write", "governance_retrievalevent", "governance_auditentry")
# SECURITY DEFINER functions that read those tables as their owner and make the
# policies' check themselves (search, migration 0035; the events naming a fact,
# 0036): a statement calling one needs the setting as much as one naming a table.
# The retrieval's prepared statements (governance.prepared) are run by name:
# ``EXECUTE governance_prepared_...`` names no table but reads them.
SCOPED = (*TABLES, "governance_search_", "governance_events_with_", PREPARED_NAME_PREFIX)


class ProjectScope:
    """The projects whose rows the current work may touch; ``None`` means every project.

    The projects may be worked out lazily (a person's memberships cost a query),
    once, when the first statement needs them.
    """

    def __init__(self, projects: Callable[[], Iterable[int] | None]) -> None:
        self._projects = projects
        self._value: str | None = None

    def setting(self) -> str:
        if self._value is None:
            projects = self._projects()
            self._value = (
                EVERY_PROJECT if projects is None else ",".join(str(int(p)) for p in sorted(projects))
            )
        return self._value


SYSTEM = ProjectScope(lambda: None)
NOTHING = ProjectScope(lambda: ())

_current: ContextVar[ProjectScope] = ContextVar("governance_project_scope", default=SYSTEM)


def current() -> ProjectScope:
    return _current.get()


def projects(ids: Iterable[int]) -> ProjectScope:
    fixed = tuple(ids)
    return ProjectScope(lambda: fixed)


def for_user(user: Any) -> ProjectScope:
    """A person's projects: those where they hold a membership (governance.access)."""
    from governance import access

    return ProjectScope(lambda: access.memberships(user).keys())


def set_scope(scope: ProjectScope) -> None:
    """Replace the scope for the rest of the current request or task (as the API's authentication does)."""
    _current.set(scope)


@contextlib.contextmanager
def scope(scope: ProjectScope) -> Iterator[ProjectScope]:
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def every_project() -> contextlib.AbstractContextManager[ProjectScope]:
    """System work inside a narrower scope (the audit writer reading the head of a chain)."""
    return scope(SYSTEM)


# Statements that read or change rows; DDL (migrations' CREATE INDEX
# CONCURRENTLY, which cannot run in a transaction) is left alone.
# EXECUTE, with PREPARE or DEALLOCATE in front of it on a first use
# (governance.prepared), runs a prepared read.
_PREPARED_READS = frozenset({"EXECUTE", "PREPARE", "DEALLOCATE"})
_ROW_STATEMENTS = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "MERGE", "DECLARE", "COPY", *_PREPARED_READS}
)


def _reads_or_writes_a_table(sql: str) -> bool:
    if not any(name in sql for name in SCOPED):
        return False
    first = sql.lstrip(" (\n\t").split(None, 1)
    return bool(first) and first[0].upper() in _ROW_STATEMENTS


def apply_scope(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Execute wrapper: the transaction's ``memoryadmin.projects`` before a statement that needs it."""
    connection = context["connection"]
    raw = connection.connection
    idle = raw.info.transaction_status == TransactionStatus.IDLE
    if idle:
        connection.rls_applied = None
    if not isinstance(sql, str) or not _reads_or_writes_a_table(sql):
        result = execute(sql, params, many, context)
        if isinstance(sql, str) and sql.startswith("ROLLBACK TO SAVEPOINT"):
            # A set_config inside the savepoint is undone with it.
            connection.rls_applied = None
        return result
    value = current().setting()
    # The setting goes over the raw connection, past Django's cursor (and so
    # past the other wrappers and the statement counts). Django's error
    # wrapper still translates what psycopg raises: a connection lost right
    # here (a database restarting) must reach the request as Django's
    # OperationalError, which answers 503, and mark the connection for
    # closing, as any other statement would.
    with connection.wrap_database_errors:
        if idle and connection.get_autocommit():
            # The statement would be a transaction of its own: make it one that
            # starts with the setting. Sent in one query string, the two are
            # one implicit transaction already (PostgreSQL runs a multi-statement
            # simple query as one), so the setting holds for the statement and
            # ends with it: one round trip instead of four (BEGIN, setting,
            # statement, COMMIT).
            if _may_prefix(sql, params, many, context):
                return _prefixed(execute, sql, params, many, context, value)
            with raw.transaction():
                raw.execute(_SET, [SETTING, value])
                return execute(sql, params, many, context)
        if getattr(connection, "rls_applied", None) != value:
            if _may_prefix(sql, params, many, context):
                # Sent ahead of the statement in the same query string: one
                # round trip instead of two, and PostgreSQL runs the two in
                # order in this transaction, so the statement sees the setting.
                result = _prefixed(execute, sql, params, many, context, value)
                connection.rls_applied = value
                return result
            raw.execute(_SET, [SETTING, value])
            connection.rls_applied = value
    return execute(sql, params, many, context)


_SET = "SELECT set_config(%s, %s, true);"
# The same for a statement with named parameters (the retrieval's candidate
# read); the names cannot be a statement's own, which are Python identifiers.
_SET_NAMED = "SELECT set_config(%(rls setting)s, %(rls value)s, true);"


def _prefixed(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any], value: str
) -> Any:
    """``sql`` run with the setting in front of it, in one query string; its own result is the cursor's."""
    if isinstance(params, Mapping):
        result = execute(
            f"{_SET_NAMED} {sql}", {**params, "rls setting": SETTING, "rls value": value}, many, context
        )
    else:
        result = execute(f"{_SET} {sql}", [SETTING, value, *params], many, context)
    while context["cursor"].nextset():
        pass  # the statement's own result is the last one
    return result


_PREFIXABLE = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", *_PREPARED_READS})


def _may_prefix(sql: str, params: Any, many: bool, context: dict[str, Any]) -> bool:
    """Whether the setting can travel in front of ``sql`` in one query string.

    Only with client-side binding (Django's default for psycopg 3, which sends
    one simple query), parameters, positional or named (without any, a
    literal % in the statement must stay as written), one execution, an
    unnamed cursor (a named one wraps the statement in DECLARE), and a plain
    read or change (not COPY or DECLARE, which keep a protocol of their own).
    """
    from psycopg import ClientCursor

    cursor = getattr(context.get("cursor"), "cursor", None)
    first = sql.lstrip(" (\n\t").split(None, 1)[0].upper()
    return (
        first in _PREFIXABLE
        and not many
        and isinstance(params, list | tuple | Mapping)
        and isinstance(cursor, ClientCursor)
        and not getattr(cursor, "name", None)
    )


def install(connection: Any, **_: Any) -> None:
    """``connection_created`` receiver: put the wrapper on every connection, outermost."""
    if connection.vendor == "postgresql" and apply_scope not in connection.execute_wrappers:
        # First, so it sees the statement as written, and so that wrappers
        # added and popped around it (pgtrigger.ignore) never pop it.
        connection.execute_wrappers.insert(0, apply_scope)
