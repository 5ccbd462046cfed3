"""Keeping facts' embeddings in step with their statements."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.embeddings import (
    LOCAL_DIMENSIONS,
    LOCAL_MODEL_NAME,
    EmbeddingProvider,
    LocalSentenceTransformerProvider,
    get_provider,
)
from governance.models import Fact
from governance.rules.guard import semantic_text

logger = logging.getLogger(__name__)

# Facts whose text may still be retrieved; withdrawn ones have none left.
EMBEDDABLE = ("active", "pending_review", "quarantined", "superseded", "expired", "out_of_scope")


def embed_fact(fact_id: int) -> bool:
    """Embed one fact if it still needs it; True when a vector was stored.

    Idempotent: a retried or duplicated task finds the fact embedded and does
    nothing. The model runs outside any transaction; the row is re-checked
    under lock before the vector is stored, in case it was withdrawn meanwhile.
    """
    return bool(embed_facts([fact_id]))


def embed_facts(fact_ids: Sequence[int]) -> list[int]:
    """``embed_fact`` for many facts with one model call (a batch of writes); the ids stored."""
    facts = list(
        Fact.objects.filter(pk__in=fact_ids, embedded_at__isnull=True, status__in=EMBEDDABLE)
        .exclude(statement="")
        .order_by("pk")
    )
    if not facts:
        return []
    for fact in facts:
        logger.info("Embedding fact %s.", fact.pk)
    vectors = get_provider().embed([fact.statement for fact in facts])
    return [fact.pk for fact, vector in zip(facts, vectors, strict=True) if _store(fact, vector)]


def _store(fact: Fact, vector: list[float]) -> bool:
    with transaction.atomic():
        locked = Fact.objects.select_for_update().filter(pk=fact.pk).first()
        if (
            locked is None
            or locked.embedded_at is not None
            or locked.statement_digest != fact.statement_digest
        ):
            return False
        if locked.status not in EMBEDDABLE or not locked.statement:
            return False
        Fact.objects.filter(pk=fact.pk).update(embedding=vector, embedded_at=timezone.now())
    # Operators (and the fault tests) count these lines: one per fact, however
    # often its task was delivered.
    logger.info("Stored the embedding of fact %s.", fact.pk)
    return True


def embed_query(text: str) -> list[float] | None:
    if not text.strip():
        return None
    [vector] = get_provider().embed([text])
    return vector


def facts_missing_embeddings(
    *, older_than: timedelta = timedelta(0), after_id: int = 0, limit: int = 500
) -> list[int]:
    """Ids of facts that should have a vector and have none, oldest first, past ``after_id``.

    ``older_than`` leaves alone facts recorded within that time: their own
    task is most likely still queued, and sending a second one only costs the
    worker a lookup.
    """
    return list(
        Fact.objects.filter(
            embedded_at__isnull=True,
            status__in=EMBEDDABLE,
            recorded_at__lte=timezone.now() - older_than,
            id__gt=after_id,
        )
        .exclude(statement="")
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


def _guard_provider() -> EmbeddingProvider:
    # The guard's classifier head was trained on this model's vectors, so it
    # reads them whatever provider serves retrieval.
    provider = get_provider()
    if provider.name == f"local:{LOCAL_MODEL_NAME}" and provider.dimensions == LOCAL_DIMENSIONS:
        return provider
    return _local_guard_provider()


@functools.cache
def _local_guard_provider() -> EmbeddingProvider:
    # One instance per process: its lock is what serialises calls into the
    # shared model (the fast tokenizer is not thread-safe).
    return LocalSentenceTransformerProvider(num_threads=getattr(settings, "EMBEDDING_NUM_THREADS", 1))


def guard_embedding(statement: str) -> tuple[float, ...] | None:
    """The vector the write guard's semantic layer reads (R5), or None if it cannot be had.

    Never raises: a failing model must not fail the write, and the guard holds
    a write that came without its vector for a person to read.
    """
    return guard_embeddings([statement])[0]


def guard_embeddings(statements: Sequence[str]) -> list[tuple[float, ...] | None]:
    """``guard_embedding`` for many statements in one model call (the batch endpoint's imports)."""
    if not statements:
        return []
    try:
        vectors = _guard_provider().embed([semantic_text(s) for s in statements])
    except Exception:
        logger.exception("The write guard could not embed statements; the writes will wait for review.")
        return [None] * len(statements)
    return [tuple(v) for v in vectors]
