"""Reads of credentials: the agent key behind a bearer secret; for the credentials page, tokens a
person may see and revoke, project members."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Field, Model, Q, QuerySet

from governance import access, prepared
from governance.models import Agent, AgentKey, Membership, PersonalAccessToken, PolicyVersion, Project


def manageable_tokens(user: Any) -> QuerySet[PersonalAccessToken]:
    """The user's own tokens, and those of the members of every project they administer."""
    admin_of = access.project_ids_with_role(user, access.ADMIN_ROLES)
    members = Membership.objects.filter(project_id__in=admin_of).values("user_id")
    return (
        PersonalAccessToken.objects.filter(Q(user_id=user.pk) | Q(user_id__in=members))
        .select_related("user")
        .defer("digest")
        .order_by("revoked_at", "-created_at")
    )


def members(project_ids: list[int]) -> QuerySet[Membership]:
    """The memberships of these projects, for their administrators to manage."""
    return (
        Membership.objects.filter(project_id__in=project_ids)
        .select_related("project", "user")
        .order_by("project__slug", "user__username")
    )


# --- the agent key behind a bearer secret (every agent API request) ----------


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column, name
    return field.column


class _Row:
    """One model's columns in a hand-written statement, and how to build its instance."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.fields = model._meta.concrete_fields
        self.attnames = [field.attname for field in self.fields]
        self.pk_index = self.fields.index(model._meta.pk)
        quote = connection.ops.quote_name
        self.columns = [f"{quote(alias)}.{quote(_column(model, field.name))}" for field in self.fields]
        # The conversions the ORM applies to these columns (a JSON field's parsing, for one).
        self.converters: list[tuple[int, list[Any], Any]] = []
        for position, field in enumerate(self.fields):
            column = field.get_col(alias)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                self.converters.append((position, found, column))

    def build(self, values: Sequence[Any]) -> Any:
        """The instance for these values, as the ORM makes it; None for a missing (outer-joined) row."""
        if values[self.pk_index] is None:
            return None
        if self.converters:
            values = list(values)
            for position, converters, column in self.converters:
                for convert in converters:
                    values[position] = convert(values[position], column, connection)
        return self.model.from_db(connection.alias, self.attnames, values)


@functools.cache
def _agent_key_statement() -> tuple[str, tuple[_Row, ...]]:
    """The agent key lookup, built once from the models: the key, its agent, the agent's
    project and active policy version (what ``select_related`` would fetch).

    Written by hand because compiling the equivalent ORM query cost more than
    running it, on every request. Each related row sits behind ``OFFSET 0`` in
    its own lateral subquery so PostgreSQL plans three primary-key lookups
    instead of searching the orders of a four-table join, which on small tables
    took longer to plan than to run.
    """
    quote = connection.ops.quote_name
    rows = (
        _Row(AgentKey, "k"),
        _Row(Agent, "a"),
        _Row(Project, "p"),
        _Row(PolicyVersion, "v"),
    )

    def lookup(model: type[Model], alias: str, key: str) -> str:
        return (
            f"(SELECT * FROM {quote(model._meta.db_table)} "
            f"WHERE {quote(_column(model, model._meta.pk.name))} = {key} OFFSET 0) {quote(alias)}"
        )

    def column(alias: str, model: type[Model], field: str) -> str:
        return f"{quote(alias)}.{quote(_column(model, field))}"

    sql = (
        f"SELECT {', '.join(column for row in rows for column in row.columns)} "
        f"FROM {quote(AgentKey._meta.db_table)} {quote('k')} "
        f"CROSS JOIN LATERAL {lookup(Agent, 'a', column('k', AgentKey, 'agent'))} "
        f"CROSS JOIN LATERAL {lookup(Project, 'p', column('a', Agent, 'project'))} "
        f"LEFT JOIN LATERAL {lookup(PolicyVersion, 'v', column('a', Agent, 'active_policy'))} ON true "
        f"WHERE {column('k', AgentKey, 'prefix')} = %s"
    )
    return sql, rows


def agent_key(prefix: str) -> AgentKey | None:
    """The agent key with this prefix (revoked or not), its agent, project and active policy
    version loaded: one statement, the same instances ``select_related`` would build.

    Prepared on the connection (``governance.prepared``): every agent request
    sends it, and planning it cost the database about as much as running it
    (0.40 ms of the server's CPU a look-up, 0.18 ms prepared; issue 13). A
    prepared statement reads the rows as they are when it runs, so a key
    revoked a moment ago is refused as before."""
    sql, rows = _agent_key_statement()
    with connection.cursor() as cursor:
        prepared.execute(cursor, sql, [prefix])
        found = cursor.fetchone()
    if found is None:
        return None
    instances = []
    start = 0
    for row in rows:
        instances.append(row.build(found[start : start + len(row.fields)]))
        start += len(row.fields)
    key, agent, project, policy = instances
    AgentKey._meta.get_field("agent").set_cached_value(key, agent)
    Agent._meta.get_field("project").set_cached_value(agent, project)
    Agent._meta.get_field("active_policy").set_cached_value(agent, policy)
    return key
