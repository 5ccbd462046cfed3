"""Keeping facts' embeddings in step with their statements."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from governance.embeddings import get_provider
from governance.models import Fact

# Facts whose text may still be retrieved; withdrawn ones have none left.
EMBEDDABLE = ("active", "pending_review", "quarantined", "superseded", "expired", "out_of_scope")


def embed_fact(fact_id: int) -> bool:
    """Embed one fact if it still needs it; True when a vector was stored.

    Idempotent: a retried or duplicated task finds the fact embedded and does
    nothing. The model runs outside any transaction; the row is re-checked
    under lock before the vector is stored, in case it was withdrawn meanwhile.
    """
    fact = Fact.objects.filter(pk=fact_id, embedded_at__isnull=True, status__in=EMBEDDABLE).first()
    if fact is None or not fact.statement:
        return False
    [vector] = get_provider().embed([fact.statement])
    with transaction.atomic():
        locked = Fact.objects.select_for_update().filter(pk=fact_id).first()
        if (
            locked is None
            or locked.embedded_at is not None
            or locked.statement_digest != fact.statement_digest
        ):
            return False
        if locked.status not in EMBEDDABLE or not locked.statement:
            return False
        Fact.objects.filter(pk=fact_id).update(embedding=vector, embedded_at=timezone.now())
    return True


def embed_query(text: str) -> list[float] | None:
    if not text.strip():
        return None
    [vector] = get_provider().embed([text])
    return vector


def facts_missing_embeddings(limit: int = 500) -> list[int]:
    return list(
        Fact.objects.filter(embedded_at__isnull=True, status__in=EMBEDDABLE)
        .exclude(statement="")
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
