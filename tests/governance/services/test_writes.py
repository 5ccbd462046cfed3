"""services.writes as such: submit_write and submit_batch, without the API in between.

The API's tests (api/test_writes.py, api/test_writes_batch.py) check what agents
see; these check what the one door for agent writes stores and refuses.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

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
