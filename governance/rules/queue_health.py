"""When the review queue is late: pure rules over plain values (no ORM)."""

from __future__ import annotations

from datetime import datetime, timedelta


def effective_sla_minutes(project_minutes: int | None, default_minutes: int) -> int:
    """A project's own SLA when it set one, else the deployment's default."""
    return project_minutes if project_minutes else default_minutes


def is_breached(oldest_waiting_at: datetime | None, now: datetime, sla_minutes: int) -> bool:
    """Breached when the oldest waiting write has waited longer than the SLA."""
    return oldest_waiting_at is not None and now - oldest_waiting_at > timedelta(minutes=sla_minutes)


def waited_words(oldest_waiting_at: datetime, now: datetime) -> str:
    """ "3 h 20 min", "2 days 4 h": how long, as a reviewer reads it."""
    minutes = max(0, int((now - oldest_waiting_at).total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} day{'s' if days != 1 else ''} {hours} h"
    if hours:
        return f"{hours} h {mins} min"
    return f"{mins} min"
