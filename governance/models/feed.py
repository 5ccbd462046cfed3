"""The change feed: governance events in a transactional outbox, and their deliveries.

A ``FeedEvent`` is written in the same transaction as the audit entry it
announces, so an event exists exactly when its change committed; each active
``WebhookEndpoint`` of the project gets a ``FeedDelivery`` row in that same
transaction. Deliveries are then attempted by Celery until the receiver answers
2xx (at least once: a receiver deduplicates by the event id).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from governance.models.audit import AuditEntry
from governance.models.projects import Project


class WebhookEndpoint(models.Model):
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="webhooks")
    url = models.URLField(max_length=500)
    # The shared secret that signs each delivery (HMAC-SHA256). It must be
    # readable to sign with, so it is stored as is; it is shown once, at creation.
    secret = models.CharField(max_length=100)
    # Event types to send; empty means every type.
    event_types = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    disabled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"webhook {self.pk} of {self.project.slug}: {self.url}"

    def wants(self, event_type: str) -> bool:
        return not self.event_types or event_type in self.event_types


class FeedEvent(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    event_type = models.CharField(max_length=40)
    audit_entry = models.OneToOneField(
        AuditEntry, on_delete=models.PROTECT, null=True, blank=True, related_name="feed_event"
    )
    payload = models.JSONField()
    created_at = models.DateTimeField()
    # Set once the event is written to the configured file or syslog sink.
    sunk_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "-created_at"], name="feed_event_project_recent"),
            models.Index(fields=["id"], condition=models.Q(sunk_at__isnull=True), name="feed_event_unsunk"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.public_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Waiting to be sent"
    RETRYING = "retrying", "Failed; will be retried"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Gave up after repeated failures"


class FeedDelivery(models.Model):
    event = models.ForeignKey(FeedEvent, on_delete=models.PROTECT, related_name="deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.PROTECT, related_name="deliveries")
    status = models.CharField(max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "endpoint"], name="feed_delivery_once_per_endpoint")
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status__in=["pending", "retrying"]),
                name="feed_delivery_due",
            ),
            models.Index(fields=["endpoint", "-id"], name="feed_delivery_log"),
        ]

    def __str__(self) -> str:
        return f"delivery of {self.event_id} to {self.endpoint_id}: {self.status}"
