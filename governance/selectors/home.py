"""The home page: per project, what needs attention and how memory is being used."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, Min, Q, QuerySet
from django.utils import timezone

from governance.models import Agent, Fact, Project, RetrievalCandidate, RetrievalEvent, Write
from governance.models.writes import REVIEWABLE

METRICS_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class ProjectOverview:
    project: Project
    agents: int
    active_facts: int
    waiting_review: int
    quarantined: int
    oldest_waiting: datetime | None
    retrievals: int
    avg_tokens: float | None
    avg_budget: float | None
    exclusions: list[tuple[str, int]] = field(default_factory=list)


def overview(projects: QuerySet[Project], *, now: datetime | None = None) -> list[ProjectOverview]:
    """One aggregate query per table for all projects, whatever their number."""
    since = (now or timezone.now()) - METRICS_WINDOW
    ids = list(projects.values_list("pk", flat=True))
    agents = dict(
        Agent.objects.filter(project__in=ids, retired_at__isnull=True)
        .values("project")
        .annotate(n=Count("id"))
        .values_list("project", "n")
    )
    facts = dict(
        Fact.objects.filter(project__in=ids, status="active")
        .values("project")
        .annotate(n=Count("id"))
        .values_list("project", "n")
    )
    waiting: dict[int, dict[str, Any]] = {
        row["project"]: dict(row)
        for row in Write.objects.filter(project__in=ids, status__in=REVIEWABLE)
        .values("project")
        .annotate(
            pending=Count("id", filter=Q(status="pending_review")),
            quarantined=Count("id", filter=Q(status="quarantined")),
            oldest=Min("created_at"),
        )
    }
    usage: dict[int, dict[str, Any]] = {
        row["project"]: dict(row)
        for row in RetrievalEvent.objects.filter(project__in=ids, created_at__gte=since)
        .values("project")
        .annotate(n=Count("id"), tokens=Avg("tokens_used"), budget=Avg("token_budget"))
    }
    exclusions: dict[int, list[tuple[str, int]]] = {}
    for row in (
        RetrievalCandidate.objects.filter(
            event__project__in=ids, event__created_at__gte=since, decision="excluded"
        )
        .values("event__project", "reason")
        .annotate(n=Count("id"))
        .order_by("event__project", "-n", "reason")
    ):
        exclusions.setdefault(row["event__project"], []).append((str(row["reason"]), int(row["n"])))
    result = []
    for project in projects.order_by("slug"):
        wait: dict[str, Any] = waiting.get(project.pk, {})
        use: dict[str, Any] = usage.get(project.pk, {})
        result.append(
            ProjectOverview(
                project=project,
                agents=agents.get(project.pk, 0),
                active_facts=facts.get(project.pk, 0),
                waiting_review=wait.get("pending", 0),
                quarantined=wait.get("quarantined", 0),
                oldest_waiting=wait.get("oldest"),
                retrievals=use.get("n", 0),
                avg_tokens=use.get("tokens"),
                avg_budget=use.get("budget"),
                exclusions=exclusions.get(project.pk, []),
            )
        )
    return result
