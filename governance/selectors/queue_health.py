"""How late the review queue is, per project: the oldest waiting write against the SLA."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection
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


@dataclass(frozen=True)
class FindingsOverTime:
    days: list[date]
    counts: dict[str, list[int]]  # finding check -> one count per day, most frequent first


FINDING_DAYS = 7
FINDING_SERIES = 6  # the most frequent categories; the rest are counted together


def findings_over_time(
    projects: QuerySet[Project], *, days: int = FINDING_DAYS, now: datetime | None = None
) -> FindingsOverTime:
    """Per day (UTC) and finding category, the writes that arrived needing review (one query)."""
    today = (now or timezone.now()).astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    ids = list(projects.values_list("pk", flat=True))
    with connection.cursor() as cursor:
        # Findings are a JSON list on the write: unnest them in the database, not per row in Python.
        cursor.execute(
            "SELECT (w.created_at AT TIME ZONE 'UTC')::date, f->>'check', count(*) "
            "FROM governance_write w CROSS JOIN LATERAL jsonb_array_elements(w.findings) f "
            "WHERE w.project_id = ANY(%s) AND w.created_at >= %s "
            "AND w.outcome IN ('pending_review', 'quarantined') GROUP BY 1, 2",
            [ids, datetime.combine(first, datetime.min.time(), tzinfo=UTC)],
        )
        rows = cursor.fetchall()
    span = [first + timedelta(days=i) for i in range(days)]
    index = {day: i for i, day in enumerate(span)}
    by_check: dict[str, list[int]] = {}
    for day, check, count in rows:
        if day in index:
            by_check.setdefault(str(check), [0] * days)[index[day]] += int(count)
    ranked = sorted(by_check, key=lambda c: (-sum(by_check[c]), c))
    counts = {check: by_check[check] for check in ranked[:FINDING_SERIES]}
    rest = ranked[FINDING_SERIES:]
    if rest:
        counts["other"] = [sum(by_check[c][i] for c in rest) for i in range(days)]
    return FindingsOverTime(days=span, counts=counts)
