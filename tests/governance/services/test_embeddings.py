"""Keeping facts' vectors in step: the sweep that finds facts whose embedding task was lost."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from governance import tasks
from governance.models import Fact
from governance.services.embeddings import facts_missing_embeddings
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
