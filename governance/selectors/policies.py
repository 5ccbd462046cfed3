"""Reads for policies: agents with their versions and drafts, version history, replay jobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from governance.models import (
    Agent,
    ChangeApproval,
    Fact,
    Job,
    PolicyDraft,
    PolicyVersion,
    Project,
    RetrievalEvent,
)
from governance.rules.policy import PolicySettings
from governance.rules.policy_changes import FieldChange, diff_settings
from governance.rules.replay import JOB_KIND


def agents(projects: QuerySet[Project]) -> QuerySet[Agent]:
    """The agents of these projects, with what the agents list shows, in two queries at most."""
    return (
        Agent.objects.filter(project__in=projects)
        .select_related("project", "active_policy", "active_policy__created_by", "policy_draft")
        .annotate(version_count=Count("policy_versions"))
        .order_by("project__slug", "slug")
    )


def agent(projects: QuerySet[Project], project_slug: str, agent_slug: str) -> QuerySet[Agent]:
    """At most one agent, only inside these projects (R1: another project's agent is a 404)."""
    return Agent.objects.filter(
        project__in=projects, project__slug=project_slug, slug=agent_slug
    ).select_related("project", "active_policy")


def draft_of(agent: Agent) -> PolicyDraft | None:
    return PolicyDraft.objects.filter(agent=agent).select_related("based_on", "updated_by").first()


@dataclass(frozen=True)
class VersionRow:
    version: PolicyVersion
    changes: list[FieldChange]  # against the version before it
    is_active: bool


def version_history(agent: Agent) -> list[VersionRow]:
    """Every version, newest first, each with what it changed compared with its predecessor."""
    versions = list(
        PolicyVersion.objects.filter(agent=agent)
        .select_related("created_by", "rolled_back_from")
        .order_by("version")
    )
    rows: list[VersionRow] = []
    previous: PolicySettings | None = None
    for version in versions:
        policy = version.policy
        rows.append(
            VersionRow(version, diff_settings(previous, policy), version.pk == agent.active_policy_id)
        )
        previous = policy
    rows.reverse()
    return rows


def replay_jobs(agent: Agent, limit: int = 10) -> QuerySet[Job]:
    return (
        Job.objects.filter(agent=agent, kind=JOB_KIND)
        .select_related("created_by")
        .order_by("-created_at")[:limit]
    )


def job(projects: QuerySet[Project], job_id: object) -> QuerySet[Job]:
    """A job inside these projects (another project's job is a 404)."""
    return Job.objects.filter(project__in=projects, pk=job_id).select_related(
        "agent", "project", "created_by"
    )


def replay_job(projects: QuerySet[Project], agent: Agent, job_id: object) -> QuerySet[Job]:
    """One of this agent's replays, inside these projects."""
    return job(projects, job_id).filter(agent=agent, kind=JOB_KIND)


def versions(agent: Agent) -> QuerySet[PolicyVersion]:
    """Every policy version of the agent, newest first, with who made it and what it rolled back."""
    return (
        PolicyVersion.objects.filter(agent=agent)
        .select_related("created_by", "rolled_back_from")
        .order_by("-version")
    )


def version(agent: Agent, number: int) -> PolicyVersion | None:
    """The agent's policy version with this number, if there is one."""
    return agent.policy_versions.filter(version=number).first()


def approvals(projects: QuerySet[Project]) -> QuerySet[ChangeApproval]:
    """Changes asked of a second administrator, in these projects (another project's is a 404)."""
    return ChangeApproval.objects.filter(project__in=projects)


def facts_for_rows(fact_ids: set[int]) -> dict[int, Fact]:
    """The facts a replay's changed-events table names, with today's statement.

    Read at display time, never copied into the job's result: a withdrawal
    erases the statement here (R8), and the table then shows it erased.
    """
    rows = Fact.objects.filter(pk__in=fact_ids).only("id", "kind", "key", "statement", "status")
    return {fact.pk: fact for fact in rows}


def pending_approvals(project_ids: list[int]) -> list[ChangeApproval]:
    """Changes waiting for a second administrator in these projects, oldest first."""
    return list(
        ChangeApproval.objects.filter(project_id__in=project_ids, status="pending")
        .select_related("project", "agent", "requested_by")
        .order_by("requested_at", "id")
    )


@dataclass(frozen=True)
class FreshnessRuler:
    """The freshness tiers (R9) on one scale, with how many of the agent's active facts fall in each."""

    title: str
    recent_days: int
    confirm_days: int
    recent: int
    confirm: int
    stale: int
    # The ruler's length in days when it is drawn beside another (the longer one's span), so
    # that both share a scale; 0 for its own.
    scale_days: int = 0

    @property
    def span_days(self) -> int:
        # The stale part gets a quarter of the ruler past the re-confirm limit.
        return max(1, round(self.confirm_days * 1.25))

    @property
    def scale(self) -> int:
        return max(self.scale_days, self.span_days)

    @property
    def recent_percent(self) -> float:
        return round(100 * self.recent_days / self.scale, 1)

    @property
    def confirm_percent(self) -> float:
        return round(100 * (self.confirm_days - self.recent_days) / self.scale, 1)

    @property
    def recent_mid(self) -> float:
        return round(self.recent_percent / 2, 1)

    @property
    def confirm_mid(self) -> float:
        return round(self.recent_percent + self.confirm_percent / 2, 1)

    @property
    def stale_mid(self) -> float:
        return round(self.confirm_end_percent + self.stale_percent / 2, 1)

    @property
    def confirm_end_percent(self) -> float:
        return round(self.recent_percent + self.confirm_percent, 1)

    @property
    def stale_percent(self) -> float:
        return round(100 - self.recent_percent - self.confirm_percent, 1)


def freshness_ruler(
    agent: Agent, title: str, recent_days: int, confirm_days: int, *, now: datetime | None = None
) -> FreshnessRuler:
    """One aggregate query: the agent's active facts by age since last verification."""
    now = now or timezone.now()
    recent_from = now - timedelta(days=recent_days)
    confirm_from = now - timedelta(days=confirm_days)
    counts = Fact.objects.filter(agent=agent, status="active").aggregate(
        recent=Count("id", filter=Q(last_verified_at__gte=recent_from)),
        confirm=Count("id", filter=Q(last_verified_at__lt=recent_from, last_verified_at__gte=confirm_from)),
        stale=Count("id", filter=Q(last_verified_at__lt=confirm_from)),
    )
    return FreshnessRuler(
        title, recent_days, confirm_days, counts["recent"], counts["confirm"], counts["stale"]
    )


USAGE_EVENTS = 500  # the recent retrievals the budget histogram is drawn from
USAGE_BINS = 10


@dataclass(frozen=True)
class TokenUsage:
    """Tokens used by the agent's recent retrievals, binned from zero to the larger budget."""

    events: int
    edges: list[int]  # USAGE_BINS + 1 bin edges
    within: list[int]  # per bin: retrievals that fit the compared budget
    over: list[int]  # per bin: retrievals that would not fit it


def token_usage(agent: Agent, active_budget: int, compared_budget: int) -> TokenUsage:
    """The last ``USAGE_EVENTS`` retrievals against ``compared_budget`` (the draft's, else the active one)."""
    used = list(
        RetrievalEvent.objects.filter(agent=agent)
        .order_by("-created_at", "-id")
        .values_list("tokens_used", flat=True)[:USAGE_EVENTS]
    )
    top = max(active_budget, compared_budget, *used, 1)
    width = max(1, -(-top // USAGE_BINS))
    edges = [width * i for i in range(USAGE_BINS + 1)]
    within = [0] * USAGE_BINS
    over = [0] * USAGE_BINS
    for tokens in used:
        index = min(USAGE_BINS - 1, tokens // width)
        (within if tokens <= compared_budget else over)[index] += 1
    return TokenUsage(events=len(used), edges=edges, within=within, over=over)
