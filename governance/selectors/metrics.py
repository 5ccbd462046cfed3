"""Live memory metrics from real traffic, per project and per agent (issue 14 item 5, docs/quality.md).

Every figure is aggregated by PostgreSQL over a bounded window (the last
``WINDOW_DAYS`` days by default): no loop over events in Python, so the
dashboard costs the same few queries at a thousand retrievals or a million.
Tokens are measured against each agent's own budget, per agent and budget,
never averaged across agents whose budgets differ.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from itertools import pairwise
from typing import Any

from django.db import connection
from django.db.models import (
    Aggregate,
    Avg,
    Count,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
)
from django.db.models.functions import TruncDate
from django.utils import timezone

from governance.models import (
    Agent,
    Project,
    RetrievalEvent,
    RetrievalFeedback,
    Write,
)
from governance.models.facts import FactStatus
from governance.models.writes import WriteStatus
from governance.selectors.reviews import QUEUE_STATUSES

WINDOW_DAYS = 30
# A given item later taken out of memory by a person: a reviewer rejected it
# (a dispute upheld, say) or the guard's quarantine was confirmed.
TAKEN_OUT = (FactStatus.REJECTED, FactStatus.QUARANTINED)


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError("A percentile is a fraction between 0 and 1.")
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


class JsonLength(Aggregate):
    """The summed length of a JSON array column (``jsonb_array_length``) over the rows."""

    function = "SUM"
    template = "COALESCE(SUM(jsonb_array_length(%(expressions)s)), 0)"
    output_field = IntegerField()


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime
    days: int
    # True when the window starts later than ``days`` ago because it held more
    # than MAX_EVENTS retrievals: the figures are those of the newest ones.
    capped: bool = False

    @classmethod
    def last(cls, days: int = WINDOW_DAYS, now: datetime | None = None) -> Window:
        until = now or timezone.now()
        return cls(since=until - timedelta(days=days), until=until, days=days)

    def dates(self) -> list[date]:
        first = timezone.localdate(self.since)
        return [first + timedelta(days=n) for n in range((timezone.localdate(self.until) - first).days + 1)]


# The most retrievals the figures read: past it the window starts later (and the
# page says so), so a dashboard answers in the same time at any volume
# (docs/quality.md, "Live metrics"; 6 s for an agent's seven questions at 1 M events).
MAX_EVENTS = 10_000


def bounded(window: Window, events: QuerySet[RetrievalEvent]) -> Window:
    """``window``, or its newest MAX_EVENTS retrievals of ``events`` when it holds more (one query)."""
    edge = list(
        events.filter(created_at__gte=window.since, created_at__lte=window.until)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[MAX_EVENTS - 1 : MAX_EVENTS + 1]
    )
    if len(edge) < 2:
        return window
    return replace(window, since=edge[0], capped=True)


@dataclass(frozen=True)
class BudgetUse:
    """One agent's measured tokens per retrieval against one budget it ran under."""

    agent: str
    agent_name: str
    budget: int
    retrievals: int
    p50: float
    p95: float
    most: int
    mean_share: float  # mean tokens used / budget, 0..1
    near_full: int  # retrievals that used at least 90% of the budget


@dataclass(frozen=True)
class Indicators:
    """Contamination and stale adoption seen on live traffic.

    From feedback: the items agents said they used, flagged as wrong, or used
    after they had changed. From later history: items given that a newer fact
    has replaced since, or that a reviewer later took out of memory.
    """

    feedback_count: int
    used: int
    wrong: int
    stale_used: int
    given: int
    later_superseded: int
    later_taken_out: int

    @property
    def wrong_rate(self) -> float | None:
        return _rate(self.wrong, self.used)

    @property
    def stale_used_rate(self) -> float | None:
        return _rate(self.stale_used, self.used)

    @property
    def later_superseded_rate(self) -> float | None:
        return _rate(self.later_superseded, self.given)

    @property
    def later_taken_out_rate(self) -> float | None:
        return _rate(self.later_taken_out, self.given)


def _rate(part: int, whole: int) -> float | None:
    """``part`` of ``whole``; None (no rate, rather than zero) when there is no whole."""
    return part / whole if whole else None


@dataclass(frozen=True)
class Queue:
    waiting: int
    quarantined: int
    oldest_at: datetime | None

    def oldest_age(self, now: datetime) -> timedelta | None:
        return now - self.oldest_at if self.oldest_at else None


@dataclass(frozen=True)
class LiveMetrics:
    window: Window
    retrievals: int
    per_day: list[tuple[date, int]]
    budgets: list[BudgetUse]
    exclusions: list[tuple[str, int]]  # (reason, count), most frequent first
    indicators: Indicators
    queue: Queue
    writes: int
    writes_by_outcome: list[tuple[str, int]]  # every outcome, in the fixed order

    @property
    def quarantine_rate(self) -> float | None:
        quarantined = dict(self.writes_by_outcome).get(WriteStatus.QUARANTINED, 0)
        return _rate(quarantined, self.writes)


def _events(project: Project, agent: Agent | None, window: Window) -> QuerySet[RetrievalEvent]:
    events = RetrievalEvent.objects.filter(
        project=project, created_at__gte=window.since, created_at__lte=window.until
    )
    return events.filter(agent=agent) if agent is not None else events


def _writes(project: Project, agent: Agent | None) -> QuerySet[Write]:
    writes = Write.objects.filter(project=project)
    return writes.filter(agent=agent) if agent is not None else writes


def per_day(events: QuerySet[RetrievalEvent], window: Window) -> list[tuple[date, int]]:
    """Retrievals per calendar day of the window, days without any included as 0."""
    counts = dict(
        events.annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("pk"))
        .values_list("day", "n")
    )
    return [(day, counts.get(day, 0)) for day in window.dates()]


def budget_use(events: QuerySet[RetrievalEvent]) -> list[BudgetUse]:
    """Per agent and budget: an agent whose budget changed shows one row per budget."""
    rows = (
        events.values("agent__slug", "agent__name", "token_budget")
        .annotate(
            n=Count("pk"),
            p50=Percentile("tokens_used", 0.5),
            p95=Percentile("tokens_used", 0.95),
            most=Max("tokens_used"),
            mean_share=Avg(F("tokens_used") * 1.0 / F("token_budget"), output_field=FloatField()),
            near_full=Count("pk", filter=Q(tokens_used__gte=F("token_budget") * 0.9)),
        )
        .order_by("agent__slug", "token_budget")
    )
    return [
        BudgetUse(
            agent=row["agent__slug"],
            agent_name=row["agent__name"],
            budget=row["token_budget"],
            retrievals=row["n"],
            p50=row["p50"],
            p95=row["p95"],
            most=row["most"],
            mean_share=row["mean_share"] or 0.0,
            near_full=row["near_full"],
        )
        for row in rows
    ]


def _event_ids_sql(events: QuerySet[RetrievalEvent]) -> tuple[str, tuple[Any, ...]]:
    """The events' ids as a subquery: candidates live inside their event (compact JSON and id
    arrays, models/retrievals.py), so the counts below unnest them in SQL."""
    sql, params = events.values("pk").query.sql_with_params()
    return sql, tuple(params)


def exclusions(events: QuerySet[RetrievalEvent]) -> list[tuple[str, int]]:
    ids, params = _event_ids_sql(events)
    with connection.cursor() as cursor:
        # Each candidate is an array, its reason second; a selected one has none.
        cursor.execute(
            "SELECT c->>1 AS reason, count(*) AS n FROM governance_retrievalevent e "
            "CROSS JOIN LATERAL jsonb_array_elements(e.candidate_data) AS c "
            f"WHERE e.id IN ({ids}) AND c->>1 IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1",
            params,
        )
        return [(str(reason), int(n)) for reason, n in cursor.fetchall()]


def indicators(events: QuerySet[RetrievalEvent]) -> Indicators:
    feedback = RetrievalFeedback.objects.filter(event__in=events).aggregate(
        n=Count("pk"), used=JsonLength("used"), wrong=JsonLength("wrong"), stale=JsonLength("stale_used")
    )
    ids, params = _event_ids_sql(events)
    with connection.cursor() as cursor:
        # Every fact an event gave, whether it was replaced after that event, or taken out since.
        cursor.execute(
            "SELECT count(*), "
            "count(*) FILTER (WHERE EXISTS (SELECT 1 FROM governance_supersession s "
            "WHERE s.old_fact_id = given.fact_id AND s.created_at > e.created_at)), "
            "count(*) FILTER (WHERE f.status = ANY(%s)) "
            "FROM governance_retrievalevent e "
            "CROSS JOIN LATERAL unnest(e.selected_fact_ids) AS given(fact_id) "
            "JOIN governance_fact f ON f.id = given.fact_id "
            f"WHERE e.id IN ({ids})",
            (list(TAKEN_OUT), *params),
        )
        n_given, replaced, taken_out = cursor.fetchone()
    return Indicators(
        feedback_count=feedback["n"],
        used=feedback["used"],
        wrong=feedback["wrong"],
        stale_used=feedback["stale"],
        given=n_given,
        later_superseded=replaced,
        later_taken_out=taken_out,
    )


def queue(project: Project, agent: Agent | None) -> Queue:
    """What waits for a reviewer now (not windowed: an old write still waiting is the point)."""
    row = (
        _writes(project, agent)
        .filter(status__in=QUEUE_STATUSES)
        .aggregate(
            waiting=Count("pk"),
            quarantined=Count("pk", filter=Q(status=WriteStatus.QUARANTINED)),
            oldest=Min("created_at"),
        )
    )
    return Queue(waiting=row["waiting"], quarantined=row["quarantined"], oldest_at=row["oldest"])


def writes_by_outcome(project: Project, agent: Agent | None, window: Window) -> list[tuple[str, int]]:
    """What the guard decided on arrival for the window's writes, every outcome listed."""
    counts = dict(
        _writes(project, agent)
        .filter(created_at__gte=window.since, created_at__lte=window.until)
        .values("outcome")
        .annotate(n=Count("pk"))
        .values_list("outcome", "n")
    )
    return [(outcome, counts.get(outcome, 0)) for outcome in WriteStatus.values]


def live_metrics(project: Project, agent: Agent | None = None, window: Window | None = None) -> LiveMetrics:
    """The dashboard's figures for a project (every agent) or one of its agents."""
    window = window or Window.last()
    window = bounded(window, _events(project, agent, window))
    events = _events(project, agent, window)
    outcomes = writes_by_outcome(project, agent, window)
    days = per_day(events, window)
    return LiveMetrics(
        window=window,
        retrievals=sum(n for _, n in days),
        per_day=days,
        budgets=budget_use(events),
        exclusions=exclusions(events),
        indicators=indicators(events),
        queue=queue(project, agent),
        writes=sum(n for _, n in outcomes),
        writes_by_outcome=outcomes,
    )


def token_share_histograms(
    project: Project, agent: Agent | None, window: Window, edges: tuple[float, ...]
) -> list[tuple[str, list[int]]]:
    """Per agent, its retrievals by share of their own budget used, in the bins between
    ``edges`` (the last bin includes its upper edge, so a full budget counts). One query."""
    share = F("tokens_used") * 1.0 / F("token_budget")
    bins = {}
    for index, (low, high) in enumerate(pairwise(edges)):
        upper = Q(share__lte=high) if index == len(edges) - 2 else Q(share__lt=high)
        bins[f"b{index}"] = Count("pk", filter=Q(share__gte=low) & upper)
    # The bins are named at run time, which the stubs' typed rows cannot follow.
    rows: list[dict[str, Any]] = list(
        _events(project, agent, window)  # type: ignore[arg-type]
        .annotate(share=share)
        .values("agent__slug")
        .annotate(**bins)
        .order_by("agent__slug")
    )
    return [(row["agent__slug"], [row[f"b{i}"] for i in range(len(edges) - 1)]) for row in rows]
