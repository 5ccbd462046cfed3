from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from governance.models import Project


@dataclass(frozen=True)
class ProjectOverview:
    project: Project
    agents: int
    active_facts: int
    waiting_review: int
    quarantined: int


def overview(projects: QuerySet[Project]) -> list[ProjectOverview]:
    rows = projects.annotate(
        n_agents=Count("agents", distinct=True),
    )
    result = []
    for project in rows:
        facts = project.facts.aggregate(active=Count("id", filter=Q(status="active")))
        writes = project.writes.aggregate(
            pending=Count("id", filter=Q(status="pending_review")),
            quarantined=Count("id", filter=Q(status="quarantined")),
        )
        result.append(
            ProjectOverview(
                project=project,
                agents=project.n_agents,
                active_facts=facts["active"],
                waiting_review=writes["pending"],
                quarantined=writes["quarantined"],
            )
        )
    return result
