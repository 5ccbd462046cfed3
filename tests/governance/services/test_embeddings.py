"""Keeping facts' vectors in step: the sweep that finds facts whose embedding task was lost."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from governance import tasks
from governance.context import actor_scope
from governance.embeddings import get_provider
from governance.models import Fact
from governance.services import embeddings as embeddings_service
from governance.services.embeddings import facts_missing_embeddings
from governance.services.facts import statement_digest
from governance.services.writes import WriteRequest, submit_write
from tests.personas import FactFactory

pytestmark = pytest.mark.django_db


def test_the_sweep_leaves_young_facts_to_their_own_task(project):
    old = FactFactory.create(project=project, recorded_at=timezone.now() - timedelta(minutes=5))
    young = FactFactory.create(project=project)

    found = facts_missing_embeddings(older_than=timedelta(seconds=60))

    assert old.pk in found
    assert young.pk not in found


def test_the_sweep_skips_withdrawn_and_embedded_facts_and_pages_by_id(project):
    long_ago = timezone.now() - timedelta(hours=1)
    owed = [FactFactory.create(project=project, recorded_at=long_ago) for _ in range(3)]
    FactFactory.create(project=project, recorded_at=long_ago, status="withdrawn", statement="")
    FactFactory.create(project=project, recorded_at=long_ago, embedded_at=timezone.now())

    first = facts_missing_embeddings(limit=2)
    rest = facts_missing_embeddings(after_id=first[-1], limit=2)

    assert first + rest == [fact.pk for fact in owed]


@pytest.mark.model
def test_the_sweep_embeds_a_fact_whose_task_was_lost(project, settings, caplog):
    settings.EMBED_SWEEP_SECONDS = 60
    lost = FactFactory.create(project=project, recorded_at=timezone.now() - timedelta(minutes=2))

    with caplog.at_level(logging.INFO, logger="governance.services.embeddings"):
        sent = tasks.embed_missing_facts.delay().get()
        # A second sweep (or a duplicate task) finds nothing owed and stores nothing again.
        again = tasks.embed_missing_facts.delay().get()

    lost.refresh_from_db()
    assert sent == 1 and again == 0
    assert lost.embedded_at is not None
    assert lost.embedding is not None and len(lost.embedding) == 384
    assert caplog.text.count(f"Stored the embedding of fact {lost.pk}.") == 1
    assert Fact.objects.filter(embedded_at__isnull=True, statement__gt="").count() == 0


@pytest.mark.model
def test_a_batch_task_embeds_its_facts_in_one_model_call_and_skips_what_is_not_owed(project, caplog):
    owed = [FactFactory.create(project=project) for _ in range(3)]
    withdrawn = FactFactory.create(project=project, status="withdrawn", statement="")
    embedded = FactFactory.create(project=project, embedded_at=timezone.now())

    with caplog.at_level(logging.INFO, logger="governance.services.embeddings"):
        stored = tasks.embed_facts.delay([f.pk for f in (*owed, withdrawn, embedded)]).get()
        again = tasks.embed_facts.delay([f.pk for f in owed]).get()

    assert (stored, again) == (3, 0)
    vectors = [Fact.objects.get(pk=f.pk).embedding for f in owed]
    assert [len(v) if v is not None else 0 for v in vectors] == [384, 384, 384]
    assert [caplog.text.count(f"Stored the embedding of fact {f.pk}.") for f in owed] == [1, 1, 1]


@pytest.mark.model
def test_a_batch_task_stores_no_vector_for_a_fact_edited_or_withdrawn_while_the_model_ran(
    project, monkeypatch, caplog
):
    kept, edited, withdrawn = (FactFactory.create(project=project) for _ in range(3))
    real = get_provider()

    class EditsWhileItReads:
        def embed(self, texts):
            # Another process changes two of the rows between the task's read and its store.
            Fact.objects.filter(pk=edited.pk).update(
                statement="I moved to Porto.", statement_digest=statement_digest("I moved to Porto.")
            )
            Fact.objects.filter(pk=withdrawn.pk).update(status="withdrawn", statement="")
            return real.embed(texts)

    monkeypatch.setattr(embeddings_service, "get_provider", lambda: EditsWhileItReads())
    with caplog.at_level(logging.INFO, logger="governance.services.embeddings"):
        stored = embeddings_service.embed_facts([kept.pk, edited.pk, withdrawn.pk])

    assert stored == [kept.pk]
    rows = {f.pk: f for f in Fact.objects.filter(pk__in=[kept.pk, edited.pk, withdrawn.pk])}
    assert rows[kept.pk].embedded_at is not None and rows[kept.pk].embedding is not None
    # The edit's own task embeds the new statement; the withdrawn fact owes nothing.
    assert (rows[edited.pk].embedded_at, rows[edited.pk].embedding) == (None, None)
    assert (rows[withdrawn.pk].embedded_at, rows[withdrawn.pk].embedding) == (None, None)
    assert "Stored the embedding of fact" in caplog.text
    assert f"Stored the embedding of fact {edited.pk}." not in caplog.text


@pytest.mark.model
def test_a_written_fact_keeps_the_guards_vector_when_it_is_the_one_the_worker_would_compute(
    support_bot, django_capture_on_commit_callbacks, caplog
):
    with (
        actor_scope(f"agent:{support_bot.agent.slug}"),
        caplog.at_level(logging.INFO, logger="governance.services.embeddings"),
        django_capture_on_commit_callbacks(execute=False) as after_commit,
    ):
        # Keyed, so the guard's model reads them before the writes are answered (a plain
        # unkeyed statement is read after: test_writes_meaning.py).
        plain = submit_write(support_bot.agent, _request("Prefers window seats on trains", key="train_seat"))
        # The guard reads this one with its spacing squeezed: its vector is not the statement's own.
        squeezed = submit_write(
            support_bot.agent, _request("Prefers  aisle seats on planes", ref="c:2", key="plane_seat")
        )

    # In with the row, though still owed its task: the row is the outbox.
    kept = Fact.objects.get(pk=plain.fact_id)
    assert kept.embedding is not None and kept.embedded_at is None
    assert Fact.objects.get(pk=squeezed.fact_id).embedding is None
    written = list(kept.embedding)

    with caplog.at_level(logging.INFO, logger="governance.services.embeddings"):
        for callback in after_commit:
            callback()

    kept.refresh_from_db()
    owed = Fact.objects.get(pk=squeezed.fact_id)
    assert kept.embedded_at is not None and list(kept.embedding) == written
    assert owed.embedded_at is not None
    # The model ran for the squeezed statement only, and each vector is what it gives for the text as written.
    assert f"Embedding fact {owed.pk}." in caplog.text
    assert f"Embedding fact {kept.pk}." not in caplog.text
    for fact in (kept, owed):
        [own] = get_provider().embed([fact.statement])
        assert max(abs(a - b) for a, b in zip(fact.embedding, own, strict=True)) < 1e-5


def test_the_guards_vector_is_not_the_facts_when_retrieval_embeds_with_another_model(monkeypatch):
    from types import SimpleNamespace

    from governance import embeddings
    from governance.services import embeddings as service

    vector = (0.1,) * 384
    assert service.fact_vector_from_guard("Prefers tea", vector) == list(vector)
    assert service.fact_vector_from_guard("Prefers  tea", vector) is None
    assert service.fact_vector_from_guard("Prefers tea", None) is None
    http = embeddings.provider_from_settings(
        SimpleNamespace(
            EMBEDDING_PROVIDER="openai",
            EMBEDDING_DIMENSIONS=384,
            EMBEDDING_API_BASE="http://127.0.0.1:9/v1",
            EMBEDDING_API_KEY="test-key",
            EMBEDDING_MODEL="text-embedding-3-small",
        )
    )
    monkeypatch.setattr(embeddings, "_provider", http)
    assert service.fact_vector_from_guard("Prefers tea", vector) is None


def _request(statement: str, ref: str = "c:1", key: str | None = None) -> WriteRequest:
    return WriteRequest(
        principal="alice",
        kind="preference",
        key=key,
        statement=statement,
        source_type="user_statement",
        source_ref=ref,
        source_observed_at=timezone.now(),
    )
