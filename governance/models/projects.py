"""Tenants, their members and agents, and the people memory is about."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from governance.models.history import tracked
from governance.models.search import substring_index


class Role(models.TextChoices):
    REVIEWER = "reviewer", "Trust-and-safety reviewer"
    POLICY_EDITOR = "policy_editor", "Policy editor"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Administrator"


@tracked()
class Project(models.Model):
    """A tenant. Nothing crosses projects (R1)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # Per-source maximum authority, overriding the defaults (docs/rules.md, R4).
    source_caps = models.JSONField(default=dict, blank=True)
    # "Two people": a change that lets more become memory without review
    # (raised caps, a lower auto-approve floor, identity checks off) waits for
    # a second administrator (services/policies.py).
    require_second_approval = models.BooleanField(default=False)
    # How long a write may wait for review before the queue is "late"; empty
    # means settings.REVIEW_SLA_MINUTES. The breach time makes the outbound
    # notification go once per breach (services/queue_health.py).
    review_sla_minutes = models.PositiveIntegerField(null=True, blank=True)
    review_sla_breached_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A person's role in one project: every check uses the role in the project of the object at hand.

    One role per person and project; ``admin`` may do everything in that project.
    Changed only through ``governance.services.memberships`` (audited).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    # Rows that existed before roles moved here get the least privileged role;
    # migration 0008 then copies each user's former group role onto them.
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.AUDITOR)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project}"


@tracked()
class Agent(models.Model):
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="agents")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    active_policy = models.ForeignKey(
        "governance.PolicyVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    retired_at = models.DateTimeField(null=True, blank=True)
    # Which source types this agent's keys may put on a write (R3, R4): empty
    # means every type an agent may claim. ``reviewer`` is never claimable by
    # an agent, and ``config`` only when an admin marks the agent as one that
    # syncs configuration (rules/supersession.py: claimable_sources).
    allowed_source_types = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    is_config_source = models.BooleanField(default=False)

    class Meta:
        ordering = ["project", "slug"]
        constraints = [models.UniqueConstraint(fields=["project", "slug"], name="agent_slug_unique")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.slug}"


class Principal(models.Model):
    """The person a memory is about, by the strong external id the agent uses."""

    # No index of its own: principal_external_id_unique starts with the project (migration 0045).
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="principals", db_index=False)
    external_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # The end of their latest session; R9 also counts their newest verified fact.
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="principal_external_id_unique")
        ]
        # The console search finds people by part of their id (models/search.py).
        indexes = [substring_index("external_id", "principal_external_id_trgm")]

    def __str__(self) -> str:
        return self.external_id

    @classmethod
    def from_row(
        cls,
        project: Project,
        pk: int,
        external_id: str,
        created_at: datetime,
        last_seen_at: datetime | None,
        *,
        using: str = "default",
    ) -> Principal:
        """A stored principal from columns another statement read with its own (one round trip fewer)."""
        principal = cls.from_db(
            using,
            ["id", "project_id", "external_id", "created_at", "last_seen_at"],
            [pk, project.pk, external_id, created_at, last_seen_at],
        )
        principal.project = project  # the caller's instance: no query for principal.project
        return principal
