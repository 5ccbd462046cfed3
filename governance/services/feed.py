"""The change feed: announcing governance events and delivering them (docs/integrations.md).

Events are written when the audit service seals an entry into its chain
(``audit.seal``), in the sealer's transaction: an entry is sealed only once its
change has committed, so the outbox holds an event exactly when its change
committed, and the events follow the chain's order and carry the entry's place
in it (sequence and hash), usually within a second of the commit.
Delivery happens after commit, in Celery, at least once: a delivery is marked
done only after the receiver answered 2xx, and a beat sweep retries what a
crashed or failed attempt left behind.
"""

from __future__ import annotations

import logging
import logging.handlers
import secrets
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.models import AuditEntry, FeedDelivery, FeedEvent, Project, WebhookEndpoint
from governance.models.feed import DeliveryStatus
from governance.rules import feed as feed_rules
from governance.services import audit

logger = logging.getLogger(__name__)

DELIVERY_TIMEOUT = 10.0
SINK_BATCH = 500


def _entry_facts(entry: AuditEntry, project: Project | None) -> feed_rules.EntryFacts:
    assert entry.sequence is not None, "an entry is announced once it is sealed"
    return feed_rules.EntryFacts(
        project=project.slug if project else None,
        sequence=entry.sequence,
        entry_hash=entry.entry_hash,
        action=entry.action,
        object_type=entry.object_type,
        object_id=entry.object_id,
        actor=entry.actor,
        data=entry.data or {},
        created_at=entry.created_at,
    )


def announced(entry: AuditEntry) -> bool:
    """Does this entry become a feed event?"""
    return feed_rules.feed_type(entry.action, entry.data or {}) is not None


def announce_audit_entry(entry: AuditEntry, project: Project | None) -> FeedEvent | None:
    """Called by ``audit.seal`` for every entry it seals; writes the feed event the entry announces."""
    event_type = feed_rules.feed_type(entry.action, entry.data or {})
    if event_type is None:
        return None
    return _publish(project, event_type, _entry_facts(entry, project), audit_entry=entry)


def announce_checkpoint(project: Project | None, sequence: int, entry_hash: str, signed_at: Any) -> FeedEvent:
    facts = feed_rules.EntryFacts(
        project=project.slug if project else None,
        sequence=sequence,
        entry_hash=entry_hash,
        action="checkpoint.signed",
        object_type="auditcheckpoint",
        object_id=str(sequence),
        actor="system",
        data={},
        created_at=signed_at,
    )
    return _publish(project, "checkpoint.signed", facts, audit_entry=None)


def _publish(
    project: Project | None,
    event_type: str,
    facts: feed_rules.EntryFacts,
    *,
    audit_entry: AuditEntry | None,
) -> FeedEvent:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("Feed events are written inside the transaction of the change they announce.")
    public_id = uuid.uuid4()
    event = FeedEvent.objects.create(
        public_id=public_id,
        project=project,
        event_type=event_type,
        audit_entry=audit_entry,
        payload=feed_rules.payload(str(public_id), event_type, facts),
        created_at=facts.created_at,
    )
    endpoints = [
        e
        for e in WebhookEndpoint.objects.filter(project=project, disabled_at__isnull=True)
        if e.wants(event_type)
    ]
    deliveries = FeedDelivery.objects.bulk_create(
        FeedDelivery(event=event, endpoint=e, next_attempt_at=facts.created_at) for e in endpoints
    )
    # Imported here: tasks import services, and this module is imported by audit.
    from governance.tasks import deliver_feed, sink_feed

    for delivery in deliveries:
        transaction.on_commit(partial(_enqueue, deliver_feed, delivery.pk))
    if sink_configured():
        transaction.on_commit(partial(_enqueue, sink_feed, None))
    return event


def _enqueue(task: Any, arg: int | None) -> None:
    # A broker outage must not fail the change that already committed: the beat
    # sweep finds what was not enqueued.
    try:
        task.delay(arg) if arg is not None else task.delay()
    except Exception:
        logger.warning(
            "The change feed could not enqueue a delivery; the sweep will retry it.", exc_info=True
        )


# --- webhooks ---------------------------------------------------------------


def create_endpoint(
    project: Project, url: str, *, event_types: list[str], description: str, user: Any
) -> tuple[WebhookEndpoint, str]:
    """A new webhook; returns it with its signing secret (shown once)."""
    unknown = sorted(set(event_types) - set(feed_rules.EVENT_TYPES))
    if unknown:
        raise ValueError(f"Unknown event types: {', '.join(unknown)}.")
    secret = "whsec_" + secrets.token_urlsafe(32)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            project=project,
            url=url,
            secret=secret,
            event_types=sorted(event_types),
            description=description,
            created_by=user if getattr(user, "pk", None) else None,
        )
        audit.record(
            project,
            "webhook.created",
            endpoint,
            data={"url": url, "event_types": sorted(event_types)},
            actor_user=user,
        )
    return endpoint, secret


def disable_endpoint(endpoint: WebhookEndpoint, *, user: Any, reason: str) -> WebhookEndpoint:
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if locked.disabled_at is None:
            locked.disabled_at = timezone.now()
            locked.save(update_fields=["disabled_at"])
            # Nothing more goes to a disabled endpoint, including what was waiting.
            locked.deliveries.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING]).update(
                status=DeliveryStatus.FAILED, last_error="The webhook was disabled."
            )
            audit.record(locked.project, "webhook.disabled", locked, reason=reason, actor_user=user)
    return locked


def deliver(delivery_id: int, *, transport: httpx.BaseTransport | None = None) -> str | None:
    """One attempt at one delivery; returns its status afterwards, None when there was nothing to do."""
    with transaction.atomic():
        # Locked for the attempt (skip_locked): a sweep and a redelivered task
        # never send the same delivery at the same moment.
        delivery = (
            FeedDelivery.objects.select_for_update(skip_locked=True)
            .select_related("event", "endpoint")
            .filter(pk=delivery_id, status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING])
            .first()
        )
        if delivery is None:
            return None
        body = feed_rules.body_bytes(delivery.event.payload)
        stamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            feed_rules.SIGNATURE_HEADER: feed_rules.signature(delivery.endpoint.secret, stamp, body),
            "X-Memory-Event-Id": str(delivery.event.public_id),
            "X-Memory-Event-Type": delivery.event.event_type,
            "User-Agent": "memoryadmin-feed/1",
        }
        now = timezone.now()
        delivery.attempts += 1
        delivery.last_attempt_at = now
        try:
            with httpx.Client(timeout=DELIVERY_TIMEOUT, transport=transport, follow_redirects=False) as http:
                response = http.post(delivery.endpoint.url, content=body, headers=headers)
            delivery.last_status_code = response.status_code
            delivery.last_error = (
                "" if response.is_success else f"The receiver answered {response.status_code}."
            )
            ok = response.is_success
        except httpx.TimeoutException:
            delivery.last_status_code = None
            delivery.last_error = "The receiver did not answer in time."
            ok = False
        except httpx.HTTPError:
            delivery.last_status_code = None
            delivery.last_error = "Could not reach the receiver."
            ok = False
        if ok:
            delivery.status, delivery.delivered_at = DeliveryStatus.DELIVERED, now
        else:
            wait = feed_rules.next_wait(delivery.attempts)
            if wait is None:
                delivery.status = DeliveryStatus.FAILED
            else:
                delivery.status, delivery.next_attempt_at = DeliveryStatus.RETRYING, now + wait
        delivery.save()
        return str(delivery.status)


def due_deliveries(limit: int = 500) -> list[int]:
    """Deliveries whose time has come: never sent, or waiting for their next retry."""
    return list(
        FeedDelivery.objects.filter(
            status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING], next_attempt_at__lte=timezone.now()
        )
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


# --- the JSON-lines sink (file or syslog) -------------------------------------


def sink_configured() -> bool:
    return bool(getattr(settings, "CHANGE_FEED_FILE", "") or getattr(settings, "CHANGE_FEED_SYSLOG", ""))


def _syslog_handler(address: str) -> logging.handlers.SysLogHandler:
    if address.startswith("/"):
        return logging.handlers.SysLogHandler(address=address)
    host, _, port = address.rpartition(":")
    return logging.handlers.SysLogHandler(address=(host or "localhost", int(port or 514)))


def sink_pending() -> int:
    """Writes events not yet written to the configured file / syslog, in order; returns how many."""
    if not sink_configured():
        return 0
    path = getattr(settings, "CHANGE_FEED_FILE", "")
    syslog = getattr(settings, "CHANGE_FEED_SYSLOG", "")
    with transaction.atomic():
        events = list(
            FeedEvent.objects.select_for_update(skip_locked=True)
            .filter(sunk_at__isnull=True)
            .order_by("pk")[:SINK_BATCH]
        )
        if not events:
            return 0
        lines = [feed_rules.body_bytes(e.payload).decode() for e in events]
        if path:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))
                out.flush()
        if syslog:
            handler = _syslog_handler(syslog)
            try:
                for line in lines:
                    handler.emit(
                        logging.makeLogRecord({"msg": line, "levelno": logging.INFO, "name": "feed"})
                    )
            finally:
                handler.close()
        # A crash between the write and this update writes the lines again next
        # time: at least once, and each line carries its event id.
        FeedEvent.objects.filter(pk__in=[e.pk for e in events]).update(sunk_at=timezone.now())
    return len(events)
