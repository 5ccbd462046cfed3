"""services.writes as such: submit_write and submit_batch, without the API in between.

The API's tests (api/test_writes.py, api/test_writes_batch.py) check what agents
see; these check what the one door for agent writes stores and refuses.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance import tasks
from governance.context import actor_scope
from governance.models import AuditEntry, Fact, Supersession, Write
from governance.services import writes
from governance.services.writes import WriteRequest
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def request(statement: str, **fields: Any) -> WriteRequest:
    values: dict[str, Any] = {
        "principal": "alice",
        "kind": "profile",
        "key": None,
        "statement": statement,
        "source_type": "user_statement",
        "source_ref": "chat:1",
        "source_observed_at": timezone.now() - timedelta(minutes=1),
        **fields,
    }
    return WriteRequest(**values)


def submit(bot: AgentPersona, req: WriteRequest, **options: Any) -> Write:
    with actor_scope(f"agent:{bot.agent.slug}"):
        return writes.submit_write(bot.agent, req, **options)


def test_a_persons_own_statement_becomes_an_active_fact_with_one_audit_entry(support_bot):
    write = submit(support_bot, request("Lives in Leeds", key="home_city"))

    assert (write.status, write.outcome) == ("active", "active")
    fact = write.fact
    assert fact is not None and fact.status == "active" and fact.principal is not None
    assert (fact.key, fact.principal.external_id) == ("home_city", "alice")
    entries = AuditEntry.objects.filter(action="write.submitted", object_id=str(write.pk))
    assert [e.data["fact"] for e in entries] == [fact.pk]
    assert write.response is not None and write.response["status"] == "active"


def test_a_new_value_for_a_key_supersedes_the_active_fact(support_bot):
    old = submit(support_bot, request("Lives in Leeds", key="home_city"))
    new = submit(support_bot, request("Lives in York", key="home_city", source_ref="chat:2"))
    assert old.fact is not None and new.fact is not None and new.response is not None

    assert Fact.objects.get(pk=old.fact.pk).status == "superseded"
    link = Supersession.objects.get(old_fact=old.fact)
    assert link.new_fact_id == new.fact.pk and link.write_id == new.pk
    assert new.response["supersedes"] == [old.fact.pk]
    assert list(Fact.objects.filter(key="home_city", status="active").values_list("pk", flat=True)) == [
        new.fact.pk
    ]


def test_a_repeated_idempotency_key_replays_and_a_changed_body_conflicts(support_bot):
    tea = request("Prefers tea")
    first = submit(support_bot, tea, idempotency_key="k-1")
    again = submit(support_bot, tea, idempotency_key="k-1")
    assert again.pk == first.pk
    assert Write.objects.count() == 1

    with pytest.raises(writes.IdempotencyConflict):
        submit(support_bot, request("Prefers coffee"), idempotency_key="k-1")
    assert Write.objects.count() == 1 and Fact.objects.count() == 1


def test_a_source_the_agent_may_not_claim_is_refused_and_nothing_is_stored(support_bot, config_bot):
    with pytest.raises(writes.SourceNotAllowed) as refused:
        submit(
            support_bot,
            request("Deploys to eu-west-2", principal=None, kind="project_fact", source_type="config"),
        )

    assert "config" not in refused.value.allowed
    assert (
        Write.objects.count(),
        Fact.objects.count(),
        AuditEntry.objects.filter(action="write.submitted").count(),
    ) == (0, 0, 0)
    accepted = submit(
        config_bot, request("Deploys to eu-west-2", principal=None, kind="project_fact", source_type="config")
    )
    assert accepted.status == "active"


def test_a_low_trust_source_waits_for_review_without_an_active_fact(support_bot):
    write = submit(
        support_bot, request("Mentioned they enjoy hiking in the Alps", source_type="chat_message")
    )

    assert write.status == "pending_review"
    assert write.fact is not None and write.fact.status == "pending_review"
    assert not Fact.objects.filter(status="active").exists()


def test_a_batch_refuses_only_the_write_it_cannot_take(support_bot):
    with actor_scope(f"agent:{support_bot.agent.slug}"):
        outcomes = writes.submit_batch(
            support_bot.agent,
            [request("Prefers window seats"), request("Is a verified admin", source_type="reviewer")],
        )

    assert outcomes[0].write is not None and outcomes[0].write.status == "active"
    assert outcomes[1].write is None and isinstance(outcomes[1].refusal, writes.SourceNotAllowed)
    assert list(Write.objects.values_list("statement", flat=True)) == ["Prefers window seats"]


# --- statements per write (issue 13) ------------------------------------------------

# services/audit.record: one INSERT of the unsealed entry (the sealer chains it after commit).
AUDIT_ENTRY = 1
# What the change feed adds to the write: nothing, since its row is written when the
# entry is sealed, after commit (services/audit.seal).
FEED_EVENT = 0


def statements(bot: AgentPersona, req: WriteRequest) -> tuple[Write, list[str]]:
    """The write and its SQL, without transaction control (the test's own transaction
    turns BEGIN/COMMIT into savepoints)."""
    with CaptureQueriesContext(connection) as ctx:
        write = submit(bot, req)
    sql = [q["sql"] for q in ctx.captured_queries]
    return write, [q for q in sql if not q.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN", "COMMIT"))]


def test_a_new_fact_takes_two_statements_its_audit_entry_included(support_bot):
    submit(support_bot, request("Prefers tea", kind="preference"))

    write, sql = statements(support_bot, request("Prefers window seats", kind="preference", source_ref="c:2"))

    # Everything the guard and the duplicate check read, the principal with it; then
    # one statement inserting the fact, the write with its 201 body (no UPDATE after
    # it) and the write's audit entry.
    assert write.status == "active" and write.response is not None
    assert write.response["fact"] == {"id": write.fact_id, "status": "active"}
    assert len(sql) == 2, sql
    assert "governance_principal" in sql[0]
    assert [t in sql[1] for t in ("governance_fact", "governance_write", "governance_auditentry")] == [
        True
    ] * 3
    assert not [q for q in sql if q.startswith("UPDATE")]
    assert Write.objects.get(pk=write.pk).response == write.response


def test_a_principals_first_write_creates_it_after_finding_nothing_of_theirs(support_bot):
    submit(support_bot, request("Prefers window seats", kind="preference", principal="alice"))

    write = submit(support_bot, request("Prefers window seats", kind="preference", principal="bob"))

    # Alice's identical fact is not Bob's: a fact of his own, about him.
    assert write.corroborated_id is None and write.fact is not None and write.principal is not None
    assert write.principal.external_id == "bob" and write.fact.principal_id == write.principal.pk
    again = submit(support_bot, request("prefers window seats.", kind="preference", principal="bob"))
    assert again.corroborated_id == write.fact_id and again.principal_id == write.principal.pk


def test_a_repeat_corroborates_with_one_look_up_and_no_update_of_the_write(support_bot):
    first = submit(support_bot, request("Prefers tea", kind="preference"))

    write, sql = statements(support_bot, request("prefers tea.", kind="preference", source_ref="chat:2"))

    # The look-ups (the principal read with them), the repeated fact under lock, the
    # write, the fact's new confidence; the corroboration's entry and the write's.
    assert write.corroborated_id == write.fact_id == first.fact_id
    assert len(sql) == 4 + 2 * AUDIT_ENTRY, sql
    assert not [q for q in sql if q.startswith('UPDATE "governance_write"')]
    stored = Write.objects.get(pk=write.pk)
    assert (stored.corroborated_id, stored.fact_id, stored.response) == (
        first.fact_id,
        first.fact_id,
        write.response,
    )


def test_a_superseding_write_inserts_its_fact_active_after_the_old_one_steps_aside(support_bot):
    old = submit(support_bot, request("Lives in Leeds", key="home_city"))

    write, sql = statements(support_bot, request("Lives in York", key="home_city", source_ref="chat:2"))

    # The principal, the keyed fact under lock, the look-ups, the contradiction pool;
    # the old fact's UPDATE, the supersession, the session blocks it was in, its entry
    # (announced on the feed); the new fact; the write and its entry in one statement.
    assert write.response is not None and write.response["supersedes"] == [old.fact_id]
    assert write.response["fact"] == {"id": write.fact_id, "status": "active"}
    assert len(sql) == 4 + 3 + AUDIT_ENTRY + FEED_EVENT + 1 + 1, sql
    assert [q.split('"')[1] for q in sql if q.startswith("UPDATE")] == ["governance_fact"]
    assert Fact.objects.get(pk=write.fact_id).status == "active"


def test_a_write_for_review_counts_the_waiting_writes_with_its_look_ups(support_bot):
    submit(support_bot, request("Lives in Leeds", key="home_city"))

    write, sql = statements(
        support_bot,
        request("Lives in Rome", key="home_city", source_type="model_inference", source_ref="m:1"),
    )

    # As a superseding write up to the decision, then only the fact, the write and
    # its entry, in one statement.
    assert write.status == "pending_review"
    assert len(sql) == 4 + 1, sql


def test_the_review_queue_limit_still_refuses_a_write_that_would_wait(support_bot, settings):
    settings.MAX_PENDING_WRITES_PER_AGENT = 1
    submit(support_bot, request("Mentioned they enjoy hiking", source_type="chat_message"))

    with pytest.raises(writes.ReviewQueueFull):
        submit(
            support_bot, request("Mentioned they enjoy sailing", source_type="chat_message", source_ref="c:2")
        )
    assert Write.objects.count() == 1


def test_a_batch_queues_one_embedding_task_and_reads_each_principal_once(
    support_bot, django_capture_on_commit_callbacks, monkeypatch
):
    sent: list[Any] = []
    monkeypatch.setattr(tasks.embed_facts, "delay", lambda ids: sent.append(("batch", ids)))
    monkeypatch.setattr(tasks.embed_fact, "delay", lambda pk: sent.append(("one", pk)))
    monkeypatch.setattr(tasks.seal_audit_chain, "delay", lambda pk: sent.append(("seal", pk)))
    submit(support_bot, request("Prefers tea", kind="preference"))
    sent.clear()
    batch = [
        request(f"Prefers seat {n} on trains", kind="preference", source_ref=f"c:{n}") for n in range(20)
    ]

    with (
        django_capture_on_commit_callbacks(execute=True),
        CaptureQueriesContext(connection) as ctx,
        actor_scope(f"agent:{support_bot.agent.slug}"),
    ):
        outcomes = writes.submit_batch(support_bot.agent, batch)

    facts = [o.write.fact_id for o in outcomes if o.write is not None]
    assert len(facts) == 20 and all(facts)
    # One hand-off to the broker for the embeddings and one for the audit chain.
    assert sent == [("batch", facts), ("seal", support_bot.agent.project_id)]
    principal_reads = [q for q in ctx.captured_queries if 'FROM "governance_principal"' in q["sql"]]
    assert len(principal_reads) == 1
