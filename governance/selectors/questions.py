"""The traffic figures behind an agent's seven questions (rules.questions), aggregated in SQL."""

from __future__ import annotations

from django.db.models import Count, Q
from django.db.models.functions import Length

from governance.models import Agent, Principal, RetrievalEvent
from governance.rules.questions import WEAK_ID_MAX_LENGTH, Traffic
from governance.selectors.metrics import Percentile, Window, bounded


def traffic(agent: Agent, window: Window | None = None) -> Traffic:
    """Four queries, whatever the volume: events, modes, feedback, people."""
    window = bounded(window or Window.last(), RetrievalEvent.objects.filter(agent=agent))
    events = RetrievalEvent.objects.filter(
        agent=agent, created_at__gte=window.since, created_at__lte=window.until
    )
    later = Q(round__gt=1, session__isnull=False)
    row = events.aggregate(
        n=Count("pk"),
        first=Count("pk", filter=Q(round=1)),
        later=Count("pk", filter=later),
        reused=Count("pk", filter=later & Q(static_block_cached=True)),
        verified=Count("pk", filter=Q(identity_verified=True)),
        feedback=Count("feedback"),
        p50=Percentile("tokens_used", 0.5),
        p95=Percentile("tokens_used", 0.95),
    )
    # A session's mode is fixed by its first round, so the first rounds count sessions by mode.
    modes = dict(events.filter(round=1).values("mode").annotate(n=Count("pk")).values_list("mode", "n"))
    people = (
        Principal.objects.filter(retrievals__in=events)
        .distinct()
        .annotate(length=Length("external_id"))
        .aggregate(
            n=Count("pk", distinct=True),
            weak=Count(
                "pk",
                distinct=True,
                filter=Q(length__lte=WEAK_ID_MAX_LENGTH) | Q(external_id__regex=r"^[[:alpha:]]+$"),
            ),
        )
    )
    return Traffic(
        days=window.days,
        retrievals=row["n"],
        since=window.since if window.capped else None,
        first_rounds=row["first"],
        later_rounds=row["later"],
        later_reused=row["reused"],
        identity_verified=row["verified"],
        p50_tokens=row["p50"],
        p95_tokens=row["p95"],
        modes=modes,
        feedback=row["feedback"],
        principals=people["n"],
        weak_principals=people["weak"],
    )
