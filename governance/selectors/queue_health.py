"""How late the review queue is, per project: the oldest waiting write against the SLA."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Min, QuerySet
from django.utils import timezone

from governance.models import Project, Write
from governance.rules import queue_health as rules
from governance.selectors.reviews import QUEUE_STATUSES


@dataclass(frozen=True)
class QueueHealth:
    project_id: int
    project: str
    sla_minutes: int
    oldest_waiting_at: datetime | None
    breached: bool
    waited: str  # how long the oldest has waited, in words ("" when nothing waits)


def queue_health(projects: QuerySet[Project], now: datetime | None = None) -> list[QueueHealth]:
    """One row per project, by slug (two queries; the oldest uses the waiting-writes index)."""
    now = now or timezone.now()
    oldest = dict(
        Write.objects.filter(project__in=projects, status__in=QUEUE_STATUSES)
        .values("project_id")
        .annotate(oldest=Min("created_at"))
        .values_list("project_id", "oldest")
    )
    rows = []
    for project_id, slug, minutes in projects.order_by("slug").values_list(
        "pk", "slug", "review_sla_minutes"
    ):
        sla = rules.effective_sla_minutes(minutes, settings.REVIEW_SLA_MINUTES)
        at = oldest.get(project_id)
        rows.append(
            QueueHealth(
                project_id=project_id,
                project=slug,
                sla_minutes=sla,
                oldest_waiting_at=at,
                breached=rules.is_breached(at, now, sla),
                waited=rules.waited_words(at, now) if at else "",
            )
        )
    return rows


def projects_to_check() -> list[int]:
    """Projects whose SLA state may change: something waits, or a breach is still marked."""
    waiting = set(Write.objects.filter(status__in=QUEUE_STATUSES).values_list("project_id", flat=True))
    marked = set(Project.objects.filter(review_sla_breached_at__isnull=False).values_list("pk", flat=True))
    return sorted(waiting | marked)
