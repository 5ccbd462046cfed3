"""Checking a change-feed delivery: is it from the memory service, and recent?

    from memoryadmin_client.webhooks import verify

    if not verify(secret, request.headers["X-Memory-Signature"], request.body):
        return 400

The header is ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`` with the
secret shown when the receiver was added in the console. Deliveries arrive at
least once: deduplicate by the event's ``id`` (also in ``X-Memory-Event-Id``).
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Memory-Signature"
DEFAULT_TOLERANCE = 300


def verify(
    secret: str, header: str, body: bytes, *, now: float | None = None, tolerance: int = DEFAULT_TOLERANCE
) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` within ``tolerance`` seconds of now."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False  # an old delivery replayed
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))
