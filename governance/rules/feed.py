"""Which audit entries become change-feed events, what they carry, and how they are signed.

Pure: no ORM. The feed carries ids, statuses and digests, never statement text or
free-text reasons: it leaves the product for other systems (a SIEM, a webhook
receiver) where a later erasure could not reach it (docs/integrations.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

# The event types a subscriber can choose, with what each means in words.
EVENT_TYPES: dict[str, str] = {
    "write.decided": "A reviewer approved, edited or rejected a memory write.",
    "write.quarantined": "A memory write was held back as unsafe.",
    "fact.superseded": "A fact was replaced by a newer one.",
    "fact.withdrawn": "A fact was withdrawn (forgotten) on request.",
    "fact.expired": "A fact reached the end of its validity.",
    "policy.published": "A new retrieval policy version went live (or an older one was restored).",
    "checkpoint.signed": "The audit trail's head was signed (a tamper-evidence checkpoint).",
}

# The review service records "write.<action>" for each decision.
# Short names for people (console); the codes above are for receivers and docs.
EVENT_LABELS: dict[str, str] = {
    "write.decided": "Review decision",
    "write.quarantined": "Write held back",
    "fact.superseded": "Fact replaced",
    "fact.withdrawn": "Fact forgotten",
    "fact.expired": "Fact expired",
    "policy.published": "Policy published",
    "checkpoint.signed": "Checkpoint signed",
}

REVIEW_ACTIONS = frozenset(
    {"write.approve", "write.reject", "write.edit_approve", "write.keep_both", "write.undo"}
)
# Held on arrival, or later by the guard's second look at a plain statement's meaning.
HELD_ACTIONS = frozenset({"write.submitted", "write.held_after_meaning_check"})
DIRECT = {
    "fact.superseded": "fact.superseded",
    "fact.withdrawn": "fact.withdrawn",
    "fact.expired": "fact.expired",
    "policy.published": "policy.published",
    "policy.rolled_back": "policy.published",
}
# Data fields copied from the audit entry: ids, statuses, settings and digests only.
SAFE_DATA_FIELDS = frozenset(
    {
        "agent",
        "changes",
        "checks",
        "corroborates",
        "decided_by",
        "fact",
        "from",
        "new_fact",
        "outcome",
        "previous",
        "previous_status",
        "rolled_back_to",
        "statement_digest",
        "supersedes",
        "to",
        "tombstone",
        "valid_to",
        "version",
        "widening",
        "write",
    }
)

SIGNATURE_HEADER = "X-Memory-Signature"
MAX_ATTEMPTS = 12
FIRST_RETRY = timedelta(seconds=30)
LONGEST_WAIT = timedelta(hours=1)


def feed_type(action: str, data: dict[str, Any]) -> str | None:
    """The feed event an audit action announces, or None when it is not part of the feed."""
    if action in DIRECT:
        return DIRECT[action]
    if action in REVIEW_ACTIONS:
        return "write.decided"
    if action in HELD_ACTIONS and data.get("outcome") == "quarantined":
        return "write.quarantined"
    return None


@dataclass(frozen=True)
class EntryFacts:
    """What the feed needs from an audit entry (kept plain for the pure functions)."""

    project: str | None
    sequence: int
    entry_hash: str
    action: str
    object_type: str
    object_id: str
    actor: str
    data: dict[str, Any]
    created_at: datetime


def payload(event_id: str, event_type: str, entry: EntryFacts) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": event_type,
        "project": entry.project,
        "occurred_at": entry.created_at.isoformat(),
        "object": {"type": entry.object_type, "id": entry.object_id},
        "action": entry.action,
        "actor": entry.actor,
        "data": {k: v for k, v in sorted(entry.data.items()) if k in SAFE_DATA_FIELDS},
        "audit": {"sequence": entry.sequence, "entry_hash": entry.entry_hash},
    }


def body_bytes(event: dict[str, Any]) -> bytes:
    return json.dumps(event, sort_keys=True, separators=(",", ":")).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``; receivers check it with
    ``memoryadmin_client.webhooks.verify`` (tested against this function)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def next_wait(attempts: int) -> timedelta | None:
    """How long to wait after ``attempts`` failures; None once it is time to give up."""
    if attempts >= MAX_ATTEMPTS:
        return None
    return min(FIRST_RETRY * 2.0 ** (attempts - 1), LONGEST_WAIT)
