"""Sessions, and the session-start blocks each has computed, cached for later rounds (R12)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone

from governance.models.policies import PolicyVersion
from governance.models.projects import Agent, Principal, Project
from governance.models.search import substring_index


class Session(models.Model):
    """One conversation of an agent with a principal.

    Bound when it is created to exactly one principal, or to none for good
    (services/sessions.py: open_session); the cached session-start blocks
    live in ``SessionBlock``.
    """

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="sessions")
    # No index of their own: session_external_id_unique and session_principal_idx
    # start with them (migration 0042).
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="sessions", db_index=False)
    principal = models.ForeignKey(
        Principal, on_delete=models.PROTECT, null=True, blank=True, related_name="sessions", db_index=False
    )
    external_id = models.CharField(max_length=200)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    summary_fact = models.ForeignKey(
        "governance.Fact", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    resume_hint = models.TextField(blank=True)
    # A hint the checks flagged when no summary came with it: never injected.
    # (With a summary, the hint waits with the summary's review instead.)
    resume_hint_held = models.BooleanField(default=False)
    # R9's mode, fixed when the session's first retrieval computes it: later
    # rounds reuse the cached block, so they must agree with it.
    mode = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "external_id"], name="session_external_id_unique")
        ]
        indexes = [
            models.Index(fields=["principal", "-started_at"], name="session_principal_idx"),
            substring_index("external_id", "session_external_id_trgm"),
        ]

    def __str__(self) -> str:
        return self.external_id


class SessionBlock(models.Model):
    """One session-start block, reused byte for byte on later rounds (R12).

    Keyed by everything that decides its content: the session, the principal
    it was made for, whether identity was verified (R13) and the policy
    version. It records the facts it holds, so a change to any of them drops
    it (services/session_blocks.py), and a later round re-checks them before
    reuse. A cache, not a record: rows are deleted, and the retrieval events
    keep the exact text that was returned (R14).
    """

    # No index of its own: session_block_key_unique starts with it (migration 0042).
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="blocks", db_index=False)
    principal = models.ForeignKey(
        Principal, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    identity_verified = models.BooleanField()
    policy_version = models.ForeignKey(PolicyVersion, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16)
    text = models.TextField()
    tokens = models.PositiveIntegerField()
    fact_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    # Per fact, in rank order: {"fact_id", "tier", "age_days", "tokens"} as
    # rendered in ``text``; no statement text, so erasure has nothing here to scrub.
    items = models.JSONField(default=list, blank=True)
    # The ended session whose resume hint the block quotes ("Last session: ..."):
    # withdrawing that session's summary clears the hint and drops this block.
    hint_session = models.ForeignKey(
        Session, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "principal", "identity_verified", "policy_version"],
                nulls_distinct=False,
                name="session_block_key_unique",
            )
        ]
        indexes = [GinIndex(fields=["fact_ids"], name="session_block_facts_gin")]

    def __str__(self) -> str:
        return f"block of session {self.session_id}"
