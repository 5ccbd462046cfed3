"""The home page: per project, what needs attention and how memory is being used."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Avg, Count, Min, Q, QuerySet
from django.utils import timezone

from governance.models import Agent, Fact, Project, RetrievalEvent, Write
from governance.models.writes import REVIEWABLE

METRICS_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class AgentUsage:
    """One agent's mean tokens against its own budget: budgets differ between agents,
    so a project-wide mean of tokens over a mean of budgets would compare nothing."""

    agent: str
    budget: int
    retrievals: int
    avg_tokens: float

    @property
    def percent(self) -> int:
        return round(100 * self.avg_tokens / self.budget) if self.budget else 0


@dataclass(frozen=True)
class ProjectOverview:
    project: Project
    agents: int
    active_facts: int
    waiting_review: int
    quarantined: int
    oldest_waiting: datetime | None
    retrievals: int
    agent_usage: list[AgentUsage] = field(default_factory=list)
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
        .annotate(n=Count("id"))
    }
    # Per agent and budget: an agent whose budget changed in the window shows one line per budget.
    per_agent: dict[int, list[AgentUsage]] = {}
    for agent_row in (
        RetrievalEvent.objects.filter(project__in=ids, created_at__gte=since)
        .values("project", "agent__slug", "token_budget")
        .annotate(n=Count("id"), tokens=Avg("tokens_used"))
        .order_by("project", "agent__slug", "token_budget")
    ):
        per_agent.setdefault(agent_row["project"], []).append(
            AgentUsage(
                agent=str(agent_row["agent__slug"]),
                budget=int(agent_row["token_budget"]),
                retrievals=int(agent_row["n"]),
                avg_tokens=float(agent_row["tokens"] or 0),
            )
        )
    exclusions: dict[int, list[tuple[str, int]]] = {}
    # Candidates live inside their event (a JSON array each, reason second): unnested here.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT e.project_id, c->>1 AS reason, count(*) AS n FROM governance_retrievalevent e "
            "CROSS JOIN LATERAL jsonb_array_elements(e.candidate_data) AS c "
            "WHERE e.project_id = ANY(%s) AND e.created_at >= %s AND c->>1 IS NOT NULL "
            "GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2",
            [list(ids), since],
        )
        for project_id, reason, n in cursor.fetchall():
            exclusions.setdefault(project_id, []).append((str(reason), int(n)))
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
                agent_usage=per_agent.get(project.pk, []),
                exclusions=exclusions.get(project.pk, []),
            )
        )
    return result
