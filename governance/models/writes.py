"""Proposed memory writes as they arrived, and the decisions people took on them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from governance.models.facts import Fact, FactKind, SourceType
from governance.models.history import append_only, tracked
from governance.models.projects import Agent, Principal, Project
from governance.models.search import full_text_index, substring_index
from governance.models.sessions import Session


class WriteStatus(models.TextChoices):
    ACTIVE = "active"
    PENDING_REVIEW = "pending_review"
    QUARANTINED = "quarantined"
    REJECTED = "rejected"


# Waiting for a reviewer: the statuses of the review queue, held by a write and by the fact it would become.
REVIEWABLE: tuple[str, ...] = ("pending_review", "quarantined")


@tracked(erasable=True)
class Write(models.Model):
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="writes")
    # No index of its own: write_agent_recent_idx starts with the agent (migration 0041).
    agent = models.ForeignKey(
        Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="writes", db_index=False
    )
    principal = models.ForeignKey(
        Principal, on_delete=models.PROTECT, null=True, blank=True, related_name="writes"
    )
    session = models.ForeignKey(
        Session, on_delete=models.PROTECT, null=True, blank=True, related_name="writes"
    )
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    # Keyed digest of the canonical request body (it holds the statement, R8):
    # same key + other body is a 409.
    request_digest = models.CharField(max_length=64, blank=True)
    kind = models.CharField(max_length=32, choices=FactKind.choices)
    key = models.CharField(max_length=200, null=True, blank=True)
    statement = models.TextField()
    # Keyed hash of the normalised statement (re-submission of rejected or
    # tombstoned assertions, R5/R8); survives erasure of the statement.
    # (write_fingerprint_idx: equality only, so no pattern-matching twin.)
    fingerprint = models.CharField(max_length=64)
    source_type = models.CharField(max_length=32, choices=SourceType.choices)
    source_ref = models.CharField(max_length=500)
    source_observed_at = models.DateTimeField()
    requested_authority = models.PositiveSmallIntegerField(null=True, blank=True)
    authority = models.PositiveSmallIntegerField()
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    derived_from_retrieval = models.ForeignKey(
        "governance.RetrievalEvent",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        # Checked by a trigger instead: events are partitioned (migration 0034).
        db_constraint=False,
    )
    findings = models.JSONField(default=list, blank=True)
    # Higher is riskier: orders the review queue before age.
    risk = models.PositiveSmallIntegerField(default=0)
    # What the guard decided on arrival, and where the write stands now.
    outcome = models.CharField(max_length=32, choices=WriteStatus.choices)
    status = models.CharField(max_length=32, choices=WriteStatus.choices)
    fact = models.ForeignKey(Fact, on_delete=models.PROTECT, null=True, blank=True, related_name="writes")
    # The active fact this write would supersede but may not on its own (R6).
    conflicts_with = models.ForeignKey(
        Fact, on_delete=models.PROTECT, null=True, blank=True, related_name="conflicting_writes"
    )
    corroborated = models.ForeignKey(
        Fact, on_delete=models.PROTECT, null=True, blank=True, related_name="corroborating_writes"
    )
    # The first 201 body, replayed for a repeated Idempotency-Key.
    response = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="write_idempotency_key_unique",
            ),
            models.CheckConstraint(condition=Q(status__in=WriteStatus.values), name="write_status_known"),
            models.CheckConstraint(condition=Q(outcome__in=WriteStatus.values), name="write_outcome_known"),
            models.CheckConstraint(
                condition=Q(authority__gte=1, authority__lte=5), name="write_authority_1_5"
            ),
        ]
        indexes = [
            models.Index(
                fields=["project", "status", "-risk", "created_at"],
                name="write_review_queue_idx",
                condition=Q(status__in=["pending_review", "quarantined"]),
            ),
            models.Index(fields=["agent", "-created_at"], name="write_agent_recent_idx"),
            models.Index(fields=["fingerprint"], name="write_fingerprint_idx"),
            # The queue's chart of writes that arrived needing review, by day
            # (selectors.queue_health.findings_over_time): about one write in twenty.
            models.Index(
                fields=["project", "created_at"],
                name="write_held_idx",
                condition=Q(outcome__in=["pending_review", "quarantined"]),
            ),
            # The per-agent limit on writes waiting for review counts these on every write
            # (up to the limit). The project is carried so that the count, which row-level
            # security filters by project, is read from the index alone (migration 0049).
            models.Index(
                fields=["agent"],
                include=["project"],
                name="write_agent_waiting_proj_idx",
                condition=Q(status__in=["pending_review", "quarantined"]),
            ),
            # R16's count of an agent's derived writes in the last hour, read by
            # every write: without it the count walks all of the agent's recent writes.
            models.Index(
                fields=["agent", "created_at"],
                name="write_agent_derived_idx",
                condition=Q(derived_from_retrieval__isnull=False),
            ),
            # The console search (models/search.py).
            full_text_index("statement", "write_statement_fts"),
            substring_index("statement", "write_statement_trgm"),
        ]

    def __str__(self) -> str:
        return f"write {self.pk} ({self.status})"

    @property
    def decision(self) -> ReviewDecision | None:
        """The decision that stands: the latest one, or none when it was undone.

        Uses ``decisions`` as prefetched (``prefetch_related("decisions__reviewer")``)."""
        latest = max(self.decisions.all(), key=lambda d: d.sequence, default=None)
        return None if latest is None or latest.action == ReviewAction.UNDO else latest


class ReviewAction(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"
    EDIT_APPROVE = "edit_approve"
    # Two facts that may contradict each other are both right (services/conflicts.py).
    KEEP_BOTH = "keep_both"
    # Reverses the decision before it, within the short undo window (docs/console.md):
    # the write waits for review again. Decisions are append-only, so an undo is a row too.
    UNDO = "undo"


# Erasable history: an edit-and-approve keeps the reviewer's statement, which a
# withdrawal (R8) must be able to blank in the history rows too.
@tracked(erasable=True)
class ReviewDecision(models.Model):
    # Decisions on a write are numbered 1, 2, ...: when two reviewers race for the
    # same number, the database lets exactly one win. A later number exists only
    # after an undo put the write back in the queue.
    write = models.ForeignKey(Write, on_delete=models.PROTECT, related_name="decisions")
    sequence = models.PositiveSmallIntegerField(default=1)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=16, choices=ReviewAction.choices)
    reason = models.TextField()
    edited_statement = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(action__in=ReviewAction.values), name="decision_action_known"),
            models.CheckConstraint(condition=~Q(reason=""), name="decision_reason_required"),
            models.UniqueConstraint(fields=["write", "sequence"], name="decision_write_sequence_unique"),
        ]
        triggers = append_only("decision", allow_erasure=True)

    def __str__(self) -> str:
        return f"{self.action} write {self.write_id}"
