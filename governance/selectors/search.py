"""The console's global search (issue 16 item 7): one question, five kinds of answer.

Statements of facts and of writes that did not become one, people by their
id, sessions by their id, retrievals by what the agent asked, and anything
named by its labelled id ("F-12", "W-3", "#12"). Matching uses the indexes
of migration 0031: statements and questions through the search functions of
migration 0035, which run the indexed match as the owner role (row-level
security would otherwise keep the application role off the indexes) and
return ids that are then read through the policy as usual. Every query is
limited to the projects given, the ones the person may read; the functions
and the tables' policies would refuse the rest anyway (governance/rls.py).

One query per kind, five in all, whatever matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from django.contrib.postgres.search import SearchRank
from django.db.models import Case, IntegerField, Model, Q, QuerySet, Value, When
from django.db.models.expressions import RawSQL

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
    """Annotates ``rank``, the one the search functions order by, to order the rows they found."""
    vector = search_vector(field)
    annotated = queryset.annotate(rank=SearchRank(vector, search_query(text)))
    # django-stubs widens the row type of an annotated generic queryset; rows are still M.
    return cast("QuerySet[M]", annotated)


# The SECURITY DEFINER function per table (migration 0035) and the column it matches.
FUNCTIONS: dict[type[Model], str] = {
    Fact: "governance_search_facts",
    Write: "governance_search_writes",
    RetrievalEvent: "governance_search_retrievals",
}


def found(
    model: type[Model],
    project_ids: list[int],
    text: str,
    *,
    limit: int | None = None,
    statuses: tuple[str, ...] | None = None,
) -> Q:
    """The rows of ``project_ids`` matching ``text`` through the indexes: the best ``limit`` by rank.

    The function returns only rows of projects that are both passed in and visible to the
    current transaction (the check the row-level security policies make), so a wrong id in
    ``project_ids`` finds nothing. It runs inside the query that reads the rows: no extra
    round trip.
    """
    function = FUNCTIONS[model]
    params: list[object] = [list(project_ids), text, limit]
    extra = ""
    if model is Write:
        extra = ", %s::text[]"
        params.append(list(statuses) if statuses is not None else None)
    sql = f"SELECT id FROM {function}(%s::bigint[], %s::text, %s::integer{extra})"
    return Q(pk__in=RawSQL(sql, params))


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

    # Each function returns the best PER_KIND + 1 by rank, the rank the page orders by again.
    top = PER_KIND + 1
    facts = _group(
        by_words(Fact.objects.filter(project_id__in=project_ids), "statement").select_related(
            "project", "principal"
        ),
        _named(reference, "fact"),
        found(Fact, project_ids, words, limit=top) if words else None,
        ("-rank", "-pk"),
    )
    # A stored write is found as its fact; these are the ones waiting for a person or refused.
    writes = _group(
        by_words(Write.objects.filter(project_id__in=project_ids), "statement").select_related(
            "project", "agent", "principal"
        ),
        _named(reference, "write"),
        found(Write, project_ids, words, limit=top, statuses=UNSTORED) if words else None,
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
        found(RetrievalEvent, project_ids, words, limit=top) if words else None,
        # By rank as the function chose them (newest first among equals), like facts and writes.
        ("-rank", "-pk"),
    )
    return SearchResults(text, reference, facts, writes, people, sessions, retrievals)
