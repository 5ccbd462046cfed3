"""governance.services.facts: withdrawal of every copy (R8), agents' limits, keyed digests.

Facts are stored directly (FactFactory) so each status a copy can be in is
covered exactly; the HTTP stories live in tests/governance/api/test_facts.py.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction

from governance.models import AuditEntry, Fact, Principal, Project, Tombstone
from governance.rules.text import lexical_signature, rekey_plain_digest
from governance.selectors.audit import verify_chain
from governance.services import facts as fact_service
from governance.services.facts import statement_digest, withdraw_fact, withdraw_on_request
from tests.helpers import wait_until
from tests.personas import AgentPersona, FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db

STATEMENT = "Keeps a spare key under the blue flowerpot"
# The same assertion to a person: case, spacing and the full stop differ (one normalised fingerprint).
VARIANT = "  keeps a SPARE key under the blue   flowerpot. "


def fact(
    project: Project, principal: Principal | None, status: str, statement: str = STATEMENT, **extra
) -> Fact:
    return FactFactory.create(
        project=project, principal=principal, status=status, statement=statement, **extra
    )


@pytest.fixture
def alice(project: Project) -> Principal:
    return PrincipalFactory.create(project=project, external_id="alice")


@pytest.fixture
def bob(project: Project) -> Principal:
    return PrincipalFactory.create(project=project, external_id="bob")


def test_a_persons_withdrawal_erases_every_copy_of_the_statement_for_that_principal(
    project, alice, bob, reviewer
):
    target = fact(project, alice, "active")
    copies = [
        fact(project, alice, status, VARIANT if status == "superseded" else STATEMENT)
        for status in ("pending_review", "quarantined", "superseded", "rejected", "expired")
    ]
    untouched = [
        fact(project, bob, "active"),  # another person's
        fact(project, None, "active", kind="project_fact"),  # the project's
        fact(project, alice, "active", "Keeps a spare key under the red flowerpot"),  # another assertion
    ]

    tombstone = withdraw_fact(target, reason="She asked us to forget it", actor="user:riley", user=reviewer)

    assert tombstone.fact_id == target.pk
    for copy in [target, *copies]:
        copy.refresh_from_db()
        assert (copy.status, copy.statement) == ("withdrawn", ""), copy
        # Each copy keeps its own tombstone: one keyed fingerprint blocks them all from coming back.
        assert Tombstone.objects.get(fact=copy).fingerprint == tombstone.fingerprint
    for other in untouched:
        other.refresh_from_db()
        assert other.status == "active" and other.statement
    entry = AuditEntry.objects.get(action="fact.withdrawn", object_id=str(target.pk))
    assert entry.data["copies_withdrawn"] == sorted(c.pk for c in copies)
    assert entry.actor == "user:riley" and entry.actor_user == reviewer
    for copy in copies:
        copied = AuditEntry.objects.get(action="fact.withdrawn", object_id=str(copy.pk))
        assert copied.data["withdrawn_with"] == target.pk
    assert verify_chain() is None


def test_a_project_facts_withdrawal_takes_only_project_level_copies(project, alice):
    target = fact(project, None, "active", kind="project_fact")
    copy = fact(project, None, "superseded", kind="project_fact")
    alices = fact(project, alice, "active")

    withdraw_fact(target, reason="Wrong", actor="user:riley")

    assert Fact.objects.get(pk=copy.pk).status == "withdrawn"
    assert Fact.objects.get(pk=alices.pk).status == "active"


def test_an_agents_withdrawal_keeps_quarantined_and_rejected_copies_for_a_reviewer(
    project, alice, support_bot: AgentPersona
):
    target = fact(project, alice, "active")
    pending = fact(project, alice, "pending_review")
    quarantined = fact(project, alice, "quarantined")
    rejected = fact(project, alice, "rejected")

    tombstone = withdraw_on_request(support_bot.agent, target, reason="She asked us to forget it")

    assert tombstone.actor == "agent:support-bot"
    assert tombstone.reason == "On the person's request: She asked us to forget it"
    assert Fact.objects.get(pk=pending.pk).status == "withdrawn"
    for evidence in (quarantined, rejected):
        kept = Fact.objects.get(pk=evidence.pk)
        assert (kept.status, kept.statement) == (evidence.status, STATEMENT)
        assert not Tombstone.objects.filter(fact=kept).exists()


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"principal": None, "kind": "project_fact"}, "project_fact"),
        ({"source_type": "config", "authority": 5}, "configuration"),
        ({"status": "pending_review"}, "under_review"),
        ({"status": "quarantined"}, "under_review"),
        ({"status": "rejected"}, "under_review"),
    ],
    ids=["project-fact", "configuration", "pending", "quarantined", "rejected"],
)
def test_an_agent_may_not_withdraw(project, alice, support_bot: AgentPersona, fields, code):
    target = fact(project, **{"principal": alice, "status": "active", **fields})

    with pytest.raises(fact_service.WithdrawalRefused) as refused:
        withdraw_on_request(support_bot.agent, target, reason="Please forget")

    assert refused.value.code == code
    # Said in plain words, for the developer of the agent.
    assert "R8" not in str(refused.value) and "reviewer" in str(refused.value)
    target.refresh_from_db()
    assert target.statement == STATEMENT and target.status == fields.get("status", "active")
    assert not Tombstone.objects.exists()


def test_withdrawing_twice_is_a_state_error(project, alice):
    target = fact(project, alice, "active")
    withdraw_fact(target, reason="Forget", actor="user:riley")

    with pytest.raises(fact_service.FactStateError):
        withdraw_fact(target, reason="Forget", actor="user:riley")


def test_statement_digest_is_keyed_with_the_tombstone_key(settings):
    plain = hashlib.sha256(STATEMENT.encode()).hexdigest()
    digest = statement_digest(STATEMENT)

    assert digest != plain
    key = settings.TOMBSTONE_KEY.encode()
    assert digest == hmac.new(key, bytes.fromhex(plain), hashlib.sha256).hexdigest()
    # A stored plain digest re-keys to the same value without the text (migration 0010).
    assert rekey_plain_digest(plain, key) == digest
    settings.TOMBSTONE_KEY = "another-key"
    assert statement_digest(STATEMENT) != digest


def test_fact_factory_digests_like_the_services(project, alice):
    assert fact(project, alice, "active").statement_digest == statement_digest(STATEMENT)
    assert settings.TOMBSTONE_KEY


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_new_facts_of_a_moment_are_embedded_by_one_task(
    project, alice, real_worker, settings, monkeypatch
):
    from governance import tasks

    sent: list[Any] = []
    for task in (tasks.embed_fact, tasks.embed_facts):
        send = task.apply_async

        def counted(
            args: Any = None, kwargs: Any = None, _send: Any = send, _name: str = task.name, **options: Any
        ):
            sent.append((_name, *tuple(args or ())))
            return _send(args, kwargs, **options)

        monkeypatch.setattr(task, "apply_async", counted)
    settings.TASK_GATHER_MS = 1500  # wide, so a slow machine still commits inside it
    fact_service._embeddings.flush()
    facts = [
        FactFactory.create(project=project, principal=alice, statement=f"Prefers seat {n}") for n in range(3)
    ]
    for fact in facts:
        with transaction.atomic():  # each its own commit, as three writes would be
            fact_service.enqueue_embedding(fact.pk)
    assert sent == []  # gathered, not sent yet

    ids = [fact.pk for fact in facts]
    wait_until(lambda: Fact.objects.filter(pk__in=ids, embedded_at__isnull=False).count() == 3, timeout=120)
    assert sent == [("governance.tasks.embed_facts", ids)]


def test_a_batch_of_new_facts_is_embedded_in_tasks_of_at_most_a_hundred(
    monkeypatch, django_capture_on_commit_callbacks
):
    from governance import tasks

    sent: list[Any] = []
    monkeypatch.setattr(tasks.embed_facts, "delay", lambda ids: sent.append(("many", ids)))
    monkeypatch.setattr(tasks.embed_fact, "delay", lambda pk: sent.append(("one", pk)))
    with django_capture_on_commit_callbacks(execute=True):
        fact_service.enqueue_embeddings(list(range(1, 251)))
        fact_service.enqueue_embeddings([7])
        fact_service.enqueue_embeddings([])

    assert [(kind, len(ids) if kind == "many" else ids) for kind, ids in sent] == [
        ("many", 100),
        ("many", 100),
        ("many", 50),
        ("one", 7),
    ]
    assert [i for kind, ids in sent if kind == "many" for i in ids] == list(range(1, 251))


# --- lexical signatures (issue 13: the write path's near-duplicate shortcut) ---------------


def test_facts_stored_without_a_signature_are_signed_once_and_the_blank_ones_never(project: Project) -> None:
    key = settings.TOMBSTONE_KEY.encode()
    unsigned = [
        FactFactory.create(project=project, statement=f"Prefers seat {n} on trains") for n in range(5)
    ]
    FactFactory.create(project=project, status="withdrawn", statement="")

    assert fact_service.sign_statements(batch_size=2) == 5
    assert fact_service.sign_statements() == 0

    for made in unsigned:
        made.refresh_from_db()
        assert made.lexical_signature == lexical_signature(made.statement, key) != 0
    assert Fact.objects.get(statement="").lexical_signature == 0


def test_withdrawal_clears_the_signature_with_the_statement(project: Project, alice: Principal) -> None:
    made = fact(project, alice, "active", lexical_signature=lexical_signature(STATEMENT, b"k"))

    withdraw_fact(made, reason="Asked to forget it", actor="user:riley")

    made.refresh_from_db()
    assert (made.statement, made.lexical_signature) == ("", 0)
