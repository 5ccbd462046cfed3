"""The console's directory of people (principals), per project, with what memory holds on each.

One query per page: the counts and the last activity are correlated
subqueries, each answered by an index on its foreign key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce, Greatest

from governance.models import Fact, Principal, Session, Write
from governance.selectors.pages import Page, by_offset, narrowed

WAITING = ("pending_review", "quarantined")


@dataclass(frozen=True)
class PeopleFilters:
    project: int | None = None
    text: str | None = None  # part of the external id


def _count(queryset: QuerySet[Any]) -> Coalesce:
    counted = queryset.filter(principal=OuterRef("pk")).order_by().values("principal").annotate(n=Count("pk"))
    return Coalesce(Subquery(counted.values("n"), output_field=IntegerField()), 0)


def people(
    project_ids: list[int], filters: PeopleFilters, *, cursor: int | None, limit: int
) -> Page[Principal]:
    """Most recently active first; each with ``active_facts``, ``waiting_writes``, ``session_count``
    and ``last_activity`` (the later of their last session's end and its start)."""
    qs = narrowed(
        Principal.objects.filter(project_id__in=project_ids),
        project_id=filters.project,
        external_id__icontains=filters.text,
    )
    sessions = Session.objects.filter(principal=OuterRef("pk"))
    latest_start = sessions.order_by("-started_at").values("started_at")[:1]
    qs = qs.select_related("project").annotate(
        active_facts=_count(Fact.objects.filter(status="active")),
        waiting_writes=_count(Write.objects.filter(status__in=WAITING)),
        session_count=_count(Session.objects.all()),
        last_activity=Greatest("last_seen_at", Subquery(latest_start)),
    )
    qs = qs.order_by(  # nulls last: people never seen in a session come after the active ones
        Coalesce("last_activity", "created_at").desc(), "project__slug", "external_id", "pk"
    )
    return by_offset(qs, cursor=cursor, limit=limit)
