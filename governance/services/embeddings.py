"""Keeping facts' embeddings in step with their statements."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from governance.embeddings import (
    LOCAL_DIMENSIONS,
    LOCAL_MODEL_NAME,
    EmbeddingProvider,
    get_provider,
    local_provider_from_settings,
)
from governance.models import Fact
from governance.models.facts import vector_text
from governance.rules.guard import semantic_text

logger = logging.getLogger(__name__)

# Facts whose text may still be retrieved; withdrawn ones have none left.
EMBEDDABLE = ("active", "pending_review", "quarantined", "superseded", "expired", "out_of_scope")


def embed_fact(fact_id: int) -> bool:
    """Embed one fact if it still needs it; True when a vector was stored.

    Idempotent: a retried or duplicated task finds the fact embedded and does
    nothing. The model runs outside any transaction; the vector is stored only
    if the row, as the UPDATE finds it, still holds the statement read, in case
    it was withdrawn or edited meanwhile.
    """
    return bool(embed_facts([fact_id]))


def embed_facts(fact_ids: Sequence[int]) -> list[int]:
    """``embed_fact`` for many facts with one model call (a batch of writes); the ids stored.

    A fact whose write stored the guard's vector as its own
    (``fact_vector_from_guard``) is only confirmed: no model call for it.
    """
    facts = list(
        Fact.objects.filter(pk__in=fact_ids, embedded_at__isnull=True, status__in=EMBEDDABLE)
        .exclude(statement="")
        .order_by("pk")
    )
    if not facts:
        return []
    owed = [fact for fact in facts if fact.embedding is None]
    for fact in owed:
        logger.info("Embedding fact %s.", fact.pk)
    vectors = dict(
        zip(
            [f.pk for f in owed],
            get_provider().embed([f.statement for f in owed]) if owed else [],
            strict=True,
        )
    )
    stored = _store(facts, vectors)
    # Operators (and the fault tests) count these lines: one per fact, however
    # often its task was delivered.
    for fact_id in stored:
        logger.info("Stored the embedding of fact %s.", fact_id)
    return stored


# Store the vectors (none: confirm the one the write stored) of facts that did not
# change meanwhile, in one statement: the row locks it takes are what makes a
# withdrawal or an edit either come first (and the row no longer matches) or wait.
_STORE = (
    "UPDATE governance_fact f SET embedded_at = %s, embedding = COALESCE(u.embedding::vector, f.embedding)"
    " FROM unnest(%s::bigint[], %s::text[], %s::text[]) u(id, embedding, digest)"
    " WHERE f.id = u.id AND f.embedded_at IS NULL AND f.statement_digest = u.digest"
    " AND f.status = ANY(%s) AND f.statement <> ''"
    # An edit took the write's vector away: the edit's own task embeds it.
    " AND (u.embedding IS NOT NULL OR f.embedding IS NOT NULL)"
    " RETURNING f.id"
)


def _store(facts: Sequence[Fact], vectors: dict[int, list[float]]) -> list[int]:
    """Store each fact's vector unless it changed since it was read; the ids stored, in order."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _STORE,
            [
                timezone.now(),
                [f.pk for f in facts],
                [vector_text(vectors[f.pk]) if f.pk in vectors else None for f in facts],
                [f.statement_digest for f in facts],
                list(EMBEDDABLE),
            ],
        )
        return sorted(row[0] for row in cursor.fetchall())


def embed_query(text: str) -> list[float] | None:
    if not text.strip():
        return None
    [vector] = get_provider().embed([text])
    return vector


def facts_missing_embeddings(
    *, older_than: timedelta = timedelta(0), after_id: int = 0, limit: int = 500
) -> list[int]:
    """Ids of facts that should have a vector and have none, or still owe the guard's second look
    at their meaning (``services.writes.complete_meaning_checks``, which the same task runs),
    oldest first, past ``after_id``.

    ``older_than`` leaves alone facts recorded within that time: their own
    task is most likely still queued, and sending a second one only costs the
    worker a lookup.
    """
    # Each side is one of two small partial indexes (fact_unembedded_idx, fact_meaning_pending_idx).
    owed = Q(embedded_at__isnull=True, status__in=EMBEDDABLE) | Q(meaning_check_pending=True)
    return list(
        Fact.objects.filter(owed, recorded_at__lte=timezone.now() - older_than, id__gt=after_id)
        .exclude(statement="")
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


def fact_vector_from_guard(statement: str, guard_vector: Sequence[float] | None) -> list[float] | None:
    """The guard's vector as the new fact's own embedding, when it is the very one the worker would compute.

    That holds when retrieval embeds with the guard's model and the guard read
    the statement as written (``semantic_text`` changed nothing: no look-alike
    letters folded, no spacing squeezed, not cut short). The write stores it
    with the row; the embedding task then confirms it without a second run of
    the model on the same text, which on this machine cost the worker as much
    CPU as the rest of the write. The row stays the outbox: ``embedded_at``
    is still NULL until that task (or the sweep) has run, and it is that task
    which starts the similarity check (``tasks.embed_fact``).
    """
    if guard_vector is None or _guard_provider() is not get_provider():
        return None
    if semantic_text(statement) != statement:
        return None
    return list(guard_vector)


def guard_vectors_of(facts: Sequence[Fact]) -> list[tuple[float, ...] | None]:
    """The guard's vector of each fact's statement: its stored embedding when that is the very
    one the guard would compute (``fact_vector_from_guard``'s test, the other way round), else
    the guard's model's reading (one call for the rest); None where it cannot be had."""
    reuse = _guard_provider() is get_provider()
    vectors: list[tuple[float, ...] | None] = [
        tuple(float(v) for v in fact.embedding)
        if reuse and fact.embedding is not None and semantic_text(fact.statement) == fact.statement
        else None
        for fact in facts
    ]
    owed = [i for i, vector in enumerate(vectors) if vector is None]
    for i, vector in zip(owed, guard_embeddings([facts[i].statement for i in owed]), strict=True):
        vectors[i] = vector
    return vectors


def _guard_provider() -> EmbeddingProvider:
    # The guard's classifier head was trained on this model's vectors, so it
    # reads them whatever provider serves retrieval.
    provider = get_provider()
    if provider.name == f"local:{LOCAL_MODEL_NAME}" and provider.dimensions == LOCAL_DIMENSIONS:
        return provider
    return _local_guard_provider()


@functools.cache
def _local_guard_provider() -> EmbeddingProvider:
    # One instance per process, built from the settings once; the model behind
    # it is loaded once per process whichever instance asks.
    return local_provider_from_settings(settings)


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
