"""Immutable policy versions per agent, and the one editable draft."""

from __future__ import annotations

from django.conf import settings as django_settings
from django.db import models
from django.utils import timezone

from governance.models.history import append_only, tracked
from governance.models.projects import Agent
from governance.rules.policy import PolicySettings


class PolicyVersion(models.Model):
    """An immutable snapshot; every retrieval records the version it used."""

    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="policy_versions")
    version = models.PositiveIntegerField()
    settings = models.JSONField()
    reason = models.TextField()
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # Set when this version was made by rolling back to an earlier one.
    rolled_back_from = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent", "-version"]
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="policy_version_unique")]
        triggers = append_only("policy_version")

    def __str__(self) -> str:
        return f"{self.agent} v{self.version}"

    @property
    def policy(self) -> PolicySettings:
        """The settings as rules read them, built once per settings a version holds.

        A stored version never changes (append-only); a retrieval asks for its
        policy several times, and building it is a few dozen microseconds each.
        """
        cached = self.__dict__.get("_policy")
        if cached is not None and cached[0] is self.settings:
            return cached[1]
        policy = PolicySettings.from_dict(self.settings)
        self.__dict__["_policy"] = (self.settings, policy)
        return policy


@tracked()
class PolicyDraft(models.Model):
    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="policy_draft")
    settings = models.JSONField()
    based_on = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    updated_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"draft of {self.agent}"

    @property
    def policy(self) -> PolicySettings:
        return PolicySettings.from_dict(self.settings)


class ChangeApproval(models.Model):
    """A change that widens what becomes memory without review, waiting for a second administrator."""

    POLICY = "policy"
    SOURCE_CAPS = "source_caps"
    KINDS = ((POLICY, "Policy version"), (SOURCE_CAPS, "Source authority caps"))
    STATUSES = (
        ("pending", "Waiting"),
        ("approved", "Approved"),
        ("rejected", "Rejected"),
        ("stale", "Out of date"),
    )

    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="approvals")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    kind = models.CharField(max_length=16, choices=KINDS)
    # The policy settings or the caps to apply, exactly as the requester saw them.
    payload = models.JSONField()
    # Policy changes: the version in force when requested; approving after it moved would undo that.
    based_on = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    widening = models.JSONField(default=list)
    reason = models.TextField()
    requested_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=16, choices=STATUSES, default="pending")
    decided_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [models.Index(fields=["project", "status"], name="approval_project_status_idx")]

    def __str__(self) -> str:
        return f"{self.kind} change {self.pk} ({self.status})"
