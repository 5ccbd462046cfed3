"""Which audit entries become feed events, what leaves the product, and the signature."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memoryadmin_client.webhooks import verify

from governance.rules import feed

ENTRY = feed.EntryFacts(
    project="acme",
    sequence=7,
    entry_hash="ab" * 32,
    action="fact.withdrawn",
    object_type="fact",
    object_id="12",
    actor="agent:support-bot",
    data={
        "previous_status": "active",
        "tombstone": 3,
        "statement_digest": "d" * 64,
        "statement": "Lives at 12 Elm Street",
        "retrieval_seals": {"4": "x"},
    },
    created_at=datetime(2026, 12, 1, tzinfo=UTC),
)


def test_only_governance_events_are_announced():
    assert feed.feed_type("fact.superseded", {}) == "fact.superseded"
    assert feed.feed_type("policy.rolled_back", {}) == "policy.published"
    assert feed.feed_type("write.edit_approve", {}) == "write.decided"
    assert feed.feed_type("write.reject", {}) == "write.decided"
    assert feed.feed_type("write.submitted", {"outcome": "quarantined"}) == "write.quarantined"
    assert feed.feed_type("write.submitted", {"outcome": "active"}) is None
    # Held later by the guard's second look at a plain statement's meaning.
    assert feed.feed_type("write.held_after_meaning_check", {"outcome": "quarantined"}) == "write.quarantined"
    assert feed.feed_type("write.held_after_meaning_check", {"outcome": "pending_review"}) is None
    assert feed.feed_type("agent_key.created", {}) is None
    assert set(feed.EVENT_TYPES) >= {feed.feed_type(a, {}) for a in feed.DIRECT}


def test_the_payload_carries_ids_and_digests_never_text():
    body = feed.payload("e-1", "fact.withdrawn", ENTRY)
    assert body["data"] == {"previous_status": "active", "tombstone": 3, "statement_digest": "d" * 64}
    assert "Elm Street" not in feed.body_bytes(body).decode()
    assert body["audit"] == {"sequence": 7, "entry_hash": "ab" * 32}
    assert (body["id"], body["type"], body["project"]) == ("e-1", "fact.withdrawn", "acme")


def test_a_signature_verifies_only_for_the_same_secret_body_and_a_recent_time():
    body = feed.body_bytes(feed.payload("e-1", "fact.withdrawn", ENTRY))
    header = feed.signature("whsec_one", 1_000_000, body)
    assert verify("whsec_one", header, body, now=1_000_100)
    assert not verify("whsec_two", header, body, now=1_000_100)
    assert not verify("whsec_one", header, body + b" ", now=1_000_100)
    assert not verify("whsec_one", header, body, now=1_000_000 + 301)  # an old delivery replayed
    assert not verify("whsec_one", "garbage", body, now=1_000_000)
    assert not verify("whsec_one", "t=x,v1=y", body, now=1_000_000)


def test_retries_back_off_and_give_up():
    waits = [feed.next_wait(n) for n in range(1, feed.MAX_ATTEMPTS + 1)]
    assert waits[0] == timedelta(seconds=30) and waits[1] == timedelta(seconds=60)
    assert all(w is not None and w <= timedelta(hours=1) for w in waits[:-1])
    assert waits[-1] is None
