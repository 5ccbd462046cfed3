"""One page of a console listing and its cursor: the one place listings paginate (and narrow).

Big tables (facts, sessions) are walked newest first by id: the cursor is the
last id shown and the next page starts below it, so it stays fast however
deep it goes. Small ones sorted by something else (the people directory)
page by offset. Either way the cursor is a plain non-negative number in the
URL, fetched one row past the page to know whether there is another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


def narrowed(queryset: QuerySet[M], **lookups: object) -> QuerySet[M]:
    """``queryset`` filtered by each lookup that was given: a listing's filter left empty
    (None or "") means "any"."""
    return queryset.filter(
        **{name: value for name, value in lookups.items() if value is not None and value != ""}
    )


@dataclass(frozen=True)
class Page(Generic[M]):
    items: list[M]
    next_cursor: int | None  # None on the last page


def newest_first(queryset: QuerySet[M], *, cursor: int | None, limit: int) -> Page[M]:
    if cursor is not None:
        queryset = queryset.filter(pk__lt=cursor)
    rows = list(queryset.order_by("-pk")[: limit + 1])
    items = rows[:limit]
    return Page(items, items[-1].pk if len(rows) > limit else None)


def by_offset(queryset: QuerySet[M], *, cursor: int | None, limit: int) -> Page[M]:
    start = cursor or 0
    rows = list(queryset[start : start + limit + 1])
    return Page(rows[:limit], start + limit if len(rows) > limit else None)
