"""The console's global search (issue 16 item 7): one question, five kinds of answer.

Statements of facts and of writes that did not become one, people by their
id, sessions by their id, retrievals by what the agent asked, and anything
named by its labelled id ("F-12", "W-3", "#12"). Matching uses the indexes
of migration 0031 through ``governance.models.search``. Every query is
limited to the projects given, the ones the person may read; the tables with
row-level security would refuse the rest anyway (governance/rls.py).

One query per kind, five in all, whatever matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from django.contrib.postgres.search import SearchRank
from django.db.models import Case, IntegerField, Model, Q, QuerySet, Value, When

from governance.models import Fact, Principal, RetrievalEvent, Session, Write
from governance.models.search import search_query, search_vector
from governance.rules.references import Reference, parse_reference

M = TypeVar("M", bound=Model)
PER_KIND = 20
UNSTORED = ("pending_review", "quarantined", "rejected")


@dataclass(frozen=True)
class Group(Generic[M]):
    items: list[M]
    more: bool  # more than shown matched: the page offers the filtered list


@dataclass(frozen=True)
class SearchResults:
    text: str
    reference: Reference | None
    facts: Group[Fact]
    writes: Group[Write]
    people: Group[Principal]
    sessions: Group[Session]
    retrievals: Group[RetrievalEvent]

    @property
    def count(self) -> int:
        groups = (self.facts, self.writes, self.people, self.sessions, self.retrievals)
        return sum(len(group.items) for group in groups)


def ranked(queryset: QuerySet[M], field: str, text: str) -> QuerySet[M]:
    """Annotates ``search`` (the indexed vector of ``field``) and ``rank`` for ``matching``."""
    vector = search_vector(field)
    annotated = queryset.annotate(search=vector, rank=SearchRank(vector, search_query(text)))
    # django-stubs widens the row type of an annotated generic queryset; rows are still M.
    return cast("QuerySet[M]", annotated)


def matching(field: str, text: str) -> Q:
    """Has the words of ``text`` (full text) or contains it (substring); needs ``ranked``."""
    return Q(search=search_query(text)) | Q(**{f"{field}__icontains": text})


def text_matches(queryset: QuerySet[M], field: str, text: str) -> QuerySet[M]:
    """The rows of ``queryset`` that match ``text``, best first: for the filtered lists."""
    return ranked(queryset, field, text).filter(matching(field, text)).order_by("-rank", "-pk")


def _named(reference: Reference | None, kind: str) -> int | None:
    if reference is None or reference.kind not in (kind, "any"):
        return None
    return reference.number


def _group(queryset: QuerySet[M], named: int | None, text_q: Q | None, order: tuple[str, ...]) -> Group[M]:
    """The row named by id first, then the text matches in ``order``."""
    if named is None and text_q is None:
        return Group([], False)
    wanted = Q(pk=named) if named is not None else Q(pk__in=[])
    first: Case | Value = Value(0)
    if named is not None:
        first = Case(When(pk=named, then=Value(1)), default=Value(0), output_field=IntegerField())
    if text_q is not None:
        wanted |= text_q
    else:
        order = ("-pk",)
    rows = list(queryset.filter(wanted).annotate(named=first).order_by("-named", *order)[: PER_KIND + 1])
    return Group(rows[:PER_KIND], len(rows) > PER_KIND)


def search(project_ids: list[int], text: str) -> SearchResults:
    text = text.strip()
    reference = parse_reference(text)
    # "F-12" and "W-3" name one thing; a bare number may also be words of a statement ("18 seats").
    words = text if text and (reference is None or reference.kind == "any") else None

    def by_words(queryset: QuerySet[M], field: str) -> QuerySet[M]:
        return ranked(queryset, field, words) if words else queryset

    facts = _group(
        by_words(Fact.objects.filter(project_id__in=project_ids), "statement").select_related(
            "project", "principal"
        ),
        _named(reference, "fact"),
        matching("statement", words) if words else None,
        ("-rank", "-pk"),
    )
    # A stored write is found as its fact; these are the ones waiting for a person or refused.
    writes = _group(
        by_words(Write.objects.filter(project_id__in=project_ids), "statement").select_related(
            "project", "agent", "principal"
        ),
        _named(reference, "write"),
        (matching("statement", words) & Q(status__in=UNSTORED)) if words else None,
        ("-rank", "-pk"),
    )
    people = _group(
        Principal.objects.filter(project_id__in=project_ids).select_related("project"),
        None,
        Q(external_id__icontains=words) if words else None,
        ("external_id", "pk"),
    )
    sessions = _group(
        Session.objects.filter(project_id__in=project_ids).select_related("project", "agent", "principal"),
        _named(reference, "session"),
        Q(external_id__icontains=words) if words else None,
        ("-pk",),
    )
    retrievals = _group(
        by_words(RetrievalEvent.objects.filter(project_id__in=project_ids), "query")
        .select_related("project", "agent", "principal", "session")
        # The listing shows the question, not the injected context.
        .defer("context", "reasons", "timings"),
        _named(reference, "retrieval"),
        matching("query", words) if words else None,
        ("-created_at", "-pk"),
    )
    return SearchResults(text, reference, facts, writes, people, sessions, retrievals)
