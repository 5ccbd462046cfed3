"""Upkeep of the retrieval log's monthly partitions: make the next ones, expire the old ones.

Retrieval events live in one partition per calendar month (UTC; migration
0034). This service, run once a day by beat (``governance.tasks.retrieval_upkeep``)
or by hand (``manage.py retrieval_upkeep``):

- makes the partitions of this month and the next
  ``settings.RETRIEVAL_PARTITIONS_AHEAD`` months, so inserts land in their own
  month rather than the default partition (which only catches what would
  otherwise fail);
- drops each month whose every event is older than
  ``settings.RETRIEVAL_RETENTION_DAYS``, one month per transaction. Before the
  drop it appends a ``retrievals.expired`` entry to the audit chain of every
  project with events in that month: the month, the first and last event id,
  how many events, how much feedback went with them, how many facts and writes
  lost their pointer to them, and, for checkpoints signed inside that id
  range, how many of the month's events each had counted (so ``verify_audit``
  can tell an expired event from a deleted one, services/checkpoints.py).

The drop itself is the database function
``governance_expire_retrieval_partition`` (SECURITY DEFINER, owned by the
owner role; the application role cannot drop tables). It refuses a month that
is not at least 183 days old, and a month any of whose projects lacks its
matching audit entry, so the log cannot shrink without the trail saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from governance.models import Project
from governance.selectors import retrievals as retrieval_selectors
from governance.services import audit

EXPIRED = "retrievals.expired"


@dataclass
class Upkeep:
    """What one run did: partitions made (their table names), months dropped with their event counts."""

    created: list[str] = field(default_factory=list)
    expired: dict[str, int] = field(default_factory=dict)


def _month(moment: date) -> date:
    return date(moment.year, moment.month, 1)


def _add_months(month: date, months: int) -> date:
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def ensure_partitions(now: datetime | None = None, *, ahead: int | None = None) -> list[str]:
    """Make this month's partition and the next ``ahead`` months'; the ones that were missing."""
    current = _month((now or datetime.now(UTC)).astimezone(UTC).date())
    ahead = settings.RETRIEVAL_PARTITIONS_AHEAD if ahead is None else ahead
    created = []
    for offset in range(ahead + 1):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT governance_create_retrieval_partition(%s)", [_add_months(current, offset)])
            name = cursor.fetchone()[0]
        if name:
            created.append(str(name))
    return created


def cutoff(now: datetime | None = None, *, days: int | None = None) -> datetime:
    """Events before this moment are past retention."""
    days = settings.RETRIEVAL_RETENTION_DAYS if days is None else days
    return (now or datetime.now(UTC)) - timedelta(days=days)


def _start(month: date) -> datetime:
    return datetime(month.year, month.month, 1, tzinfo=UTC)


def _past(month: date, limit: datetime) -> bool:
    """Is every moment of ``month`` before ``limit``?"""
    return _start(_add_months(month, 1)) <= limit


def expirable_months(now: datetime | None = None, *, days: int | None = None) -> list[date]:
    """Months with a partition whose every event is older than the cut-off, oldest first."""
    limit = cutoff(now, days=days)
    return [m for m in retrieval_selectors.stored_months() if _past(m, limit)]


def expire_month(month: date, *, retention_days: int | None = None) -> int:
    """Drop one month of retrieval events, recording it in each affected project's chain first."""
    label = month.strftime("%Y-%m")
    days = settings.RETRIEVAL_RETENTION_DAYS if retention_days is None else retention_days
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Locks the month: nothing joins it before this transaction ends.
            cursor.execute("SELECT * FROM governance_retrieval_partition_summary(%s)", [month])
            columns = [c.name for c in cursor.description or ()]
            rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
        projects = Project.objects.in_bulk([row["project_id"] for row in rows])
        for row in rows:
            audit.record(
                projects[row["project_id"]],
                EXPIRED,
                ("retrievalevent", label),
                reason=f"Past the retention period of {days} days.",
                data=_entry_data(label, days, row),
            )
        with connection.cursor() as cursor:
            cursor.execute("SELECT governance_expire_retrieval_partition(%s)", [month])
            return int(cursor.fetchone()[0])


def _entry_data(label: str, days: int, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "month": label,
        "retention_days": days,
        "first_id": row["first_id"],
        "last_id": row["last_id"],
        "count": row["event_count"],
        "feedback_removed": row["feedback_count"],
        "facts_unlinked": row["fact_count"],
        "writes_unlinked": row["write_count"],
        # Django reads jsonb from a plain cursor as its text.
        "counts_at_checkpoints": {
            through: int(count) for through, count in json.loads(row["counts_at_checkpoints"]).items()
        },
    }


def run_upkeep(now: datetime | None = None) -> Upkeep:
    """Make the coming months' partitions and expire the months past retention."""
    done = Upkeep(created=ensure_partitions(now))
    limit = cutoff(now)
    for month in expirable_months(now):
        done.expired[month.strftime("%Y-%m")] = expire_month(month)
    # Old events that sit in the default partition (their month had no partition
    # when they were stored): read once the partitioned months are gone, so the
    # scan reads the default partition alone. Expiring makes their partition first.
    for month in retrieval_selectors.default_partition_months(limit):
        if _past(month, limit):
            done.expired[month.strftime("%Y-%m")] = expire_month(month)
    return done
