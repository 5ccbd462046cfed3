"""models.retrievals.events_naming: "which retrievals saw or injected this fact" (migration 0036).

The application role cannot use the GIN indexes on the events' fact arrays
under row-level security; the SECURITY DEFINER functions behind
``events_naming`` can, and must apply the same project check as the policy.
"""

from __future__ import annotations

import pytest
from django.db import connection

from governance import rls
from governance.models import Fact, RetrievalEvent
from governance.models.retrievals import events_naming
from tests.governance.database_helpers import owner_cursor
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def uses_fact_index(plan: str) -> bool:
    """An index scan on the candidates' GIN index (named per partition once the table is partitioned)."""
    return any("Index Scan" in line and "candidate_fact" in line for line in plan.splitlines())


def injected(bot: AgentPersona, statement: str, session: str) -> tuple[int, int]:
    """A fact written by ``bot`` and the event of a retrieval that injected it."""
    bot.write(statement, kind="preference")
    answer = bot.retrieve(session, round=1)
    fact = Fact.objects.get(project=bot.agent.project, statement=statement)
    return fact.pk, answer["retrieval_id"]


def test_the_events_naming_a_fact_are_found(support_bot: AgentPersona) -> None:
    fact, event = injected(support_bot, "Prefers tea", "s-1")
    support_bot.retrieve("s-2", round=1, principal="bob")  # another person's retrieval: not naming it

    assert list(RetrievalEvent.objects.filter(pk__in=events_naming(fact)).values_list("pk", flat=True)) == [
        event
    ]
    assert list(RetrievalEvent.objects.filter(pk__in=events_naming(fact, selected=True))) == [
        RetrievalEvent.objects.get(pk=event)
    ]


def test_the_functions_return_nothing_of_a_project_outside_the_scope(
    support_bot: AgentPersona, outsider_bot: AgentPersona
) -> None:
    theirs, their_event = injected(outsider_bot, "Prefers green tea", "s-9")

    with rls.scope(rls.projects([support_bot.agent.project_id])), connection.cursor() as cursor:
        # Called directly, not through a query the policy also binds.
        cursor.execute("SELECT governance_events_with_candidate(%s)", [theirs])
        assert cursor.fetchall() == []
        cursor.execute("SELECT governance_events_with_selected(%s)", [theirs])
        assert cursor.fetchall() == []
    with rls.scope(rls.projects([outsider_bot.agent.project_id])), connection.cursor() as cursor:
        cursor.execute("SELECT governance_events_with_candidate(%s)", [theirs])
        assert cursor.fetchall() == [(their_event,)]


def test_the_application_role_cannot_use_the_index_without_them(support_bot: AgentPersona) -> None:
    """Why the functions exist: the policy runs first, so ``@>`` filters every event in scope."""
    fact, _ = injected(support_bot, "Prefers tea", "s-1")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM governance_retrievalevent WHERE candidate_fact_ids @> ARRAY[%s::bigint]",
            [fact],
        )
        direct = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert not uses_fact_index(direct) and "Seq Scan" in direct
    # The functions run as the owner, whom the policy does not bind: their query uses the index.
    with owner_cursor() as owned_cursor, owned_cursor.connection.transaction():
        owned_cursor.execute("SET LOCAL enable_seqscan = off")
        owned_cursor.execute(
            "EXPLAIN SELECT id FROM governance_retrievalevent "
            "WHERE candidate_fact_ids @> ARRAY[%s::bigint] AND governance_project_in_scope(project_id)",
            [fact],
        )
        owned = "\n".join(row[0] for row in owned_cursor.fetchall())
    assert uses_fact_index(owned)
