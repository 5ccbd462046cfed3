"""Celery tasks: each takes ids, re-fetches, exits quietly when there is nothing to do."""

from __future__ import annotations

import logging

from celery import shared_task

from governance.services import embeddings as embedding_service

logger = logging.getLogger(__name__)

# Retries with exponential backoff (2 s doubling to 5 min, jittered): a model
# or database hiccup delays the work, never loses it.
RETRY_FOR = (Exception,)


@shared_task(
    name="governance.tasks.embed_fact",
    autoretry_for=RETRY_FOR,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
)
def embed_fact(fact_id: int) -> bool:
    return embedding_service.embed_fact(fact_id)


@shared_task(name="governance.tasks.embed_missing_facts")
def embed_missing_facts() -> int:
    """Beat safety net: facts whose on-commit task was lost get embedded here."""
    ids = embedding_service.facts_missing_embeddings()
    for fact_id in ids:
        embed_fact.delay(fact_id)
    return len(ids)
