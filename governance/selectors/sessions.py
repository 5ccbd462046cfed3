"""Reads for the console's session page, and the summary diff the review queue shows (R17).

A session page is a fixed number of queries whatever the session holds: the
session with its agent, principal and summary fact, its retrieval events, and
the writes made in it with their facts. ``summary_diff`` runs no query at all,
so the review queue can call it per write on a page it already fetched.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from governance.models import Fact, Principal, RetrievalEvent, Session, SessionBlock, Write
from governance.rules import guard
from governance.rules.sessions import resume_hint_findings
from governance.rules.summaries import DroppedItem, highlight_source
from governance.rules.supersession import effective_caps
from governance.selectors.pages import Page, narrowed, newest_first

SUMMARY_CHECK = "summary_check"


@dataclass(frozen=True)
class Segment:
    text: str
    dropped: bool


@dataclass(frozen=True)
class SummaryDiff:
    """A summary beside what it was made from, with what it dropped marked (R17).

    ``segments`` cover the whole source in order; they are empty when there is
    no source to show (none was given, or it was erased by a withdrawal).
    """

    summary: str
    checked: bool  # False: no source text came with the summary, so R17 had nothing to compare
    source_available: bool
    segments: tuple[Segment, ...]
    dropped: tuple[DroppedItem, ...]  # one per (category, text), in source order
    # The stored offsets do not fit the stored source (it cannot be highlighted reliably).
    misaligned: bool = False

    @property
    def material(self) -> bool:
        return bool(self.dropped)


def summary_diff(fact: Fact | None) -> SummaryDiff | None:
    """The diff for a summary fact; None for anything else. Reads only loaded fields."""
    if fact is None or fact.kind != "summary":
        return None
    check = fact.summary_check
    if not isinstance(check, dict):
        return SummaryDiff(
            summary=fact.statement, checked=False, source_available=False, segments=(), dropped=()
        )
    items = [DroppedItem.from_dict(raw) for raw in check.get("dropped", [])]
    distinct: dict[tuple[str, str], DroppedItem] = {}
    for item in items:
        distinct.setdefault((item.category, item.text.casefold()), item)
    source = fact.summary_source or ""
    segments: tuple[Segment, ...] = ()
    misaligned = False
    if source:
        try:
            segments = tuple(Segment(text, dropped) for text, dropped in highlight_source(source, items))
        except ValueError:
            # Offsets from another text: showing the source unmarked is honest,
            # marking the wrong words would not be.
            segments, misaligned = (Segment(source, False),), True
    return SummaryDiff(
        summary=fact.statement,
        checked=True,
        source_available=bool(source),
        segments=segments,
        dropped=tuple(distinct.values()),
        misaligned=misaligned,
    )


def has_summary_finding(write: Write) -> bool:
    """Whether R17 flagged this write (its findings name the summary check)."""
    return any(isinstance(f, dict) and f.get("check") == SUMMARY_CHECK for f in write.findings or [])


@dataclass(frozen=True)
class SessionPage:
    session: Session
    rounds: list[RetrievalEvent]
    writes: list[Write]
    summary_write: Write | None
    summary: SummaryDiff | None
    # The guard's findings on the resume hint; any means retrieval withholds it (R5).
    hint_findings: tuple[guard.Finding, ...]
    # The session-start blocks cached for later rounds (R12), newest first.
    blocks: list[SessionBlock]

    @property
    def hint_withheld(self) -> bool:
        return bool(self.hint_findings)


def sessions_for_page() -> QuerySet[Session]:
    """Sessions with what the page header shows; scope it to the viewer's projects first."""
    return Session.objects.select_related("project", "agent", "principal", "summary_fact").defer(
        "summary_fact__embedding"
    )


def session_page(session: Session) -> SessionPage:
    """Everything the session page shows, in four queries after the session itself."""
    rounds = list(
        RetrievalEvent.objects.filter(session=session)
        .select_related("policy_version")
        .order_by("created_at", "id")
    )
    writes = list(
        Write.objects.filter(session=session)
        .select_related("fact")
        .defer("fact__embedding")
        .order_by("created_at", "id")
    )
    summary_write = next(
        (w for w in writes if session.summary_fact_id is not None and w.fact_id == session.summary_fact_id),
        None,
    )
    caps = effective_caps(session.project.source_caps)
    blocks = list(
        SessionBlock.objects.filter(session=session)
        .select_related("policy_version")
        .order_by("-created_at", "-id")
    )
    return SessionPage(
        blocks=blocks,
        session=session,
        rounds=rounds,
        writes=writes,
        summary_write=summary_write,
        summary=summary_diff(session.summary_fact),
        hint_findings=resume_hint_findings(session.resume_hint, caps),
    )


# The session's own columns a list row shows (a person's sessions, the session list).
LIST_COLUMNS = ("id", "external_id", "started_at", "ended_at", "mode")


def principal_sessions(principal: Principal, *, limit: int = 20) -> list[Session]:
    """A person's latest sessions, newest first, for linking from the principal page (sessions:detail)."""
    return list(
        Session.objects.filter(principal=principal)
        .select_related("agent", "summary_fact")
        .only(*LIST_COLUMNS, "agent__slug", "summary_fact__id", "summary_fact__status")
        .order_by("-started_at", "-id")[:limit]
    )


# --- The console's session list (issue 16 item 7) -----------------------------


@dataclass(frozen=True)
class SessionFilters:
    project: int | None = None
    agent: str | None = None  # slug
    principal: str | None = None  # external id, exact
    mode: str | None = None
    text: str | None = None  # part of the session's external id


def session_list(
    project_ids: list[int], filters: SessionFilters, *, cursor: int | None, limit: int
) -> Page[Session]:
    """Sessions newest first, each with ``retrieval_count``: one query."""
    qs = narrowed(
        Session.objects.filter(project_id__in=project_ids),
        project_id=filters.project,
        agent__slug=filters.agent,
        principal__external_id=filters.principal,
        mode=filters.mode,
        external_id__icontains=filters.text,
    )
    retrievals = (
        RetrievalEvent.objects.filter(session=OuterRef("pk"))
        .order_by()
        .values("session")
        .annotate(n=Count("pk"))
        .values("n")
    )
    qs = (
        qs.select_related("project", "agent", "principal")
        .only(
            *LIST_COLUMNS,
            "summary_fact",
            "project__slug",
            "agent__slug",
            "principal__external_id",
            "principal__project",
        )
        .annotate(retrieval_count=Coalesce(Subquery(retrievals, output_field=IntegerField()), 0))
    )
    return newest_first(qs, cursor=cursor, limit=limit)
