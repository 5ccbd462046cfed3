"""Memory-quality evaluation runs: scripted scenarios measured against the five metrics."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class EvaluationStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class EvaluationRun(models.Model):
    """One run of ``memory_eval`` over a set of scenarios (docs/quality.md).

    A run belongs to no project: each scenario plays in projects of its own,
    made for the run, so nothing it writes can reach real memory. ``passed``
    is whether every scenario met its thresholds; ``status`` is whether the
    run itself finished.
    """

    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # "command", "console" or "test": where the run was started.
    origin = models.CharField(max_length=16, default="command")
    scenario_files = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=EvaluationStatus.choices, default=EvaluationStatus.QUEUED
    )
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    passed = models.BooleanField(null=True, blank=True)
    overall = models.JSONField(null=True, blank=True)
    scenarios = models.JSONField(default=list)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"evaluation run {self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in {EvaluationStatus.SUCCEEDED, EvaluationStatus.FAILED}
