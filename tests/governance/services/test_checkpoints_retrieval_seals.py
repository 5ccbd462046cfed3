"""Retrieval events' stored text joins the tamper-evident trail through keyed seals (R14, R15)."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from governance.models import AuditEntry, Fact, RetrievalEvent
from governance.services import checkpoints
from tests.governance.database_helpers import tamper
from tests.governance.services.test_lifecycle import STATEMENT, withdraw

# The tampering is done on the owner's connection, which sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def verify() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("verify_audit", stdout=out, stderr=StringIO())
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


@pytest.fixture
def served(support_bot: Any) -> tuple[int, list[int]]:
    """A fact an agent was given in two sessions: (fact id, retrieval event ids)."""
    fact_id = support_bot.write(STATEMENT, key="editor_theme", kind="preference")["fact"]["id"]
    Fact.objects.filter(pk=fact_id).update(embedding=[0.25] * 384, embedded_at=timezone.now())
    events = [support_bot.retrieve("s-1")["retrieval_id"], support_bot.retrieve("s-2")["retrieval_id"]]
    assert all(STATEMENT in e.context for e in RetrievalEvent.objects.filter(pk__in=events))
    return fact_id, events


def test_retrieval_is_sealed_with_no_extra_query(served: tuple[int, list[int]]) -> None:
    for event in RetrievalEvent.objects.filter(pk__in=served[1]):
        assert event.context_seal == checkpoints.seal_retrieval(
            event.project_id,
            event.agent_id,
            event.created_at,
            event.query,
            event.context,
            event.candidate_data,
        )
    status, out = verify()
    assert status == 0, out
    assert "Retrieval events match their seals: 2 checked." in out


def test_context_edited_by_a_database_administrator_is_reported(served: tuple[int, list[int]]) -> None:
    victim = served[1][1]
    tamper(
        "UPDATE governance_retrievalevent SET context = replace(context, %s, %s) WHERE id = %s",
        [STATEMENT, "Prefers light mode", victim],
        table="governance_retrievalevent",
    )

    status, out = verify()

    assert status == 1
    assert f"retrieval_id={victim}" in out
    assert "does not match its seal" in out


def test_candidate_decision_edited_in_the_database_is_reported(served: tuple[int, list[int]]) -> None:
    """The candidates live in the event's row, and its seal covers them: an exclusion
    turned into a selection (or any score changed) no longer matches."""
    fact_id, events = served
    victim = events[0]
    event = RetrievalEvent.objects.get(pk=victim)
    [recorded] = [row for row in event.candidate_data if row[0] == fact_id]
    assert recorded[1] is None  # selected
    tamper(
        "UPDATE governance_retrievalevent SET candidate_data = jsonb_set(candidate_data, %s, %s::jsonb) "
        "WHERE id = %s",
        ["{" + str(event.candidate_data.index(recorded)) + ",1}", '"stale"', victim],
        table="governance_retrievalevent",
    )

    status, out = verify()

    assert status == 1
    assert f"retrieval_id={victim}" in out
    assert "does not match its seal" in out


def test_erasure_switch_set_by_hand_opens_nothing(served: tuple[int, list[int]]) -> None:
    """The old switch, a setting any session could change, no longer lets an edit through."""
    victim = served[1][0]
    with (
        pytest.raises(DatabaseError, match="Cannot update"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT set_config('memoryadmin.erasure', 'on', true)")
        cursor.execute(
            "UPDATE governance_retrievalevent SET query = 'nothing happened' WHERE id = %s", [victim]
        )

    assert RetrievalEvent.objects.get(pk=victim).query != "nothing happened"
    assert verify()[0] == 0


def test_withdrawal_redaction_is_resealed_recorded_and_accepted(
    support_bot: Any, served: tuple[int, list[int]]
) -> None:
    fact_id, events = served
    withdraw(support_bot, fact_id)

    redacted = {e.pk: e for e in RetrievalEvent.objects.filter(pk__in=events)}
    assert all(STATEMENT not in e.context for e in redacted.values())
    entry = AuditEntry.objects.get(action="fact.withdrawn", object_id=str(fact_id))
    assert entry.data["retrieval_seals"] == {str(pk): e.context_seal for pk, e in sorted(redacted.items())}
    status, out = verify()
    assert status == 0, out


def test_event_deleted_after_a_checkpoint_is_reported(served: tuple[int, list[int]]) -> None:
    checkpoints.write_checkpoints()
    victim = served[1][0]
    tamper("DELETE FROM governance_retrievalevent WHERE id = %s", [victim], table="governance_retrievalevent")

    status, out = verify()

    assert status == 1
    assert "1 of the 2 events recorded up to event" in out
    assert "is gone: it was deleted" in out
    assert "Retrieval events of project acme are not what was recorded" in out


def test_a_new_retrieval_moves_the_checkpoint(support_bot: Any, served: tuple[int, list[int]]) -> None:
    checkpoints.write_checkpoints()
    newest = support_bot.retrieve("s-3")["retrieval_id"]

    [checkpoint] = checkpoints.write_checkpoints()

    assert (checkpoint.retrievals_through, checkpoint.retrieval_count) == (newest, 3)
