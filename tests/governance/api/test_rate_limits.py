"""Per-key API rate limits and the per-agent limit on writes waiting for review (issue 12 item 4)."""

from __future__ import annotations

import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import cache
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from governance.api.throttling import CredentialRateThrottle
from governance.models import AgentKey, Fact, Session, Write
from tests.governance.review_helpers import PENDING, QUARANTINED
from tests.personas import make_agent, token_client

pytestmark = pytest.mark.django_db


def assert_rate_limited(response: Any) -> None:
    assert response.status_code == 429, response.content
    assert response.json()["error"]["code"] == "rate_limited"
    assert response.json()["error"]["fields"] == {}
    assert "Too many requests" in response.json()["error"]["message"]
    assert 1 <= int(response["Retry-After"]) <= 60


def test_an_agent_key_over_its_limit_gets_429_with_retry_after(settings, support_bot, outsider_bot):
    settings.API_RATE_PER_MINUTE = 3
    for _ in range(3):
        assert support_bot.client.get("/api/v1/principals/alice/memories").status_code == 404
    assert_rate_limited(support_bot.client.get("/api/v1/principals/alice/memories"))
    # Each key has its own allowance.
    assert outsider_bot.client.get("/api/v1/principals/alice/memories").status_code == 404


def test_a_refused_write_is_not_stored(settings, support_bot):
    settings.API_RATE_PER_MINUTE = 1
    support_bot.client.get("/api/v1/principals/alice/memories")
    response = support_bot.client.post(
        "/api/v1/writes",
        {
            "principal": "alice",
            "kind": "preference",
            "statement": "Prefers tea",
            "source": {"type": "user_statement", "ref": "chat:1", "observed_at": "2026-01-01T00:00:00Z"},
        },
        format="json",
    )
    assert_rate_limited(response)
    assert not Write.objects.exists()


def test_a_personal_access_token_has_its_own_limit(settings, reviewer):
    settings.API_RATE_PER_MINUTE = 2
    client = token_client(reviewer)
    for _ in range(2):
        assert client.get("/api/v1/admin/reviews").status_code == 200
    assert_rate_limited(client.get("/api/v1/admin/reviews"))
    assert token_client(reviewer).get("/api/v1/admin/reviews").status_code == 200


def post_write(bot: Any, statement: str, source_type: str = "chat_message") -> Any:
    return bot.client.post(
        "/api/v1/writes",
        {
            "principal": "alice",
            "kind": "preference",
            "statement": statement,
            "source": {"type": source_type, "ref": "chat:7", "observed_at": "2026-01-01T00:00:00Z"},
        },
        format="json",
    )


def test_writes_beyond_the_review_queue_limit_are_refused_and_not_stored(settings, project, support_bot):
    settings.MAX_PENDING_WRITES_PER_AGENT = 2
    assert post_write(support_bot, PENDING).json()["status"] == "pending_review"
    assert post_write(support_bot, QUARANTINED, "web_page").json()["status"] == "quarantined"

    refused = post_write(support_bot, "Mentioned they like sailing on the lake")
    assert refused.status_code == 429, refused.content
    error = refused.json()["error"]
    assert error["code"] == "review_queue_full"
    assert "2 memory writes waiting for a reviewer" in error["message"]
    assert "Nothing was stored" in error["message"]
    assert Write.objects.count() == 2
    assert not Fact.objects.filter(statement__contains="sailing").exists()

    # A write that becomes active needs no reviewer and is still accepted.
    assert post_write(support_bot, "Prefers tea", "user_statement").json()["status"] == "active"
    # Another agent's queue is its own.
    other = make_agent(project, "other-bot")
    assert post_write(other, "Mentioned they like sailing on the lake").json()["status"] == "pending_review"


def test_a_session_summary_that_would_wait_is_refused_and_the_session_stays_open(settings, support_bot):
    settings.MAX_PENDING_WRITES_PER_AGENT = 1
    assert post_write(support_bot, PENDING).json()["status"] == "pending_review"
    response = support_bot.client.post(
        "/api/v1/sessions/s-1/end",
        {
            "principal": "alice",
            "summary": "Talked about hiking plans for the summer",
            "resume_hint": "Ask about the hike",
            "first_event": "e1",
            "last_event": "e9",
            # The summary drops a name, a number and a prohibition: it would wait for review.
            "source_text": "Alice plans 3 hikes with Dr. Okafor this summer. Never call her after 9pm.",
        },
        format="json",
    )
    assert response.status_code == 429, response.content
    assert response.json()["error"]["code"] == "review_queue_full"
    assert not Session.objects.filter(external_id="s-1", ended_at__isnull=False).exists()


# --- the count itself, on a clock of the test's own -------------------------------


class _Clocked:
    """The throttle as DRF makes it for each request, for one agent key, at times the test sets."""

    def __init__(self, key: AgentKey, monkeypatch: pytest.MonkeyPatch) -> None:
        self.request: Any = SimpleNamespace(auth=key)  # what get_cache_key reads of a request
        self.now = 1_000_000.0
        monkeypatch.setattr(CredentialRateThrottle, "timer", lambda throttle: self.now)

    def ask(self, at: float) -> tuple[bool, float]:
        """Whether a request at ``at`` is let through, and the wait DRF would answer with."""
        self.now = at
        throttle = CredentialRateThrottle()
        allowed = throttle.allow_request(self.request, None)
        return allowed, (0.0 if allowed else throttle.wait())


def test_the_last_minute_is_counted_per_second_whatever_the_limit(settings, support_bot, monkeypatch):
    """A high limit keeps one count per second, not one entry per request (issue 13). A
    second's requests leave the count together, a minute after that second began (a list
    of their times would let each go a minute after its own time, up to a second later)."""
    settings.API_RATE_PER_MINUTE = 1000
    key = AgentKey.objects.get(agent=support_bot.agent)
    clock = _Clocked(key, monkeypatch)
    start = 1_000_000.0
    for n in range(1000):  # 100 requests in each of ten seconds
        assert clock.ask(start + n / 100)[0], n
    allowed, wait = clock.ask(start + 30.5)
    assert not allowed
    # The first second's hundred leave the count at start + 60: one more may come then.
    assert wait == pytest.approx(29.5)
    # The key's summary: the last second folded in (two behind the clock), then a count per second.
    record = cache.get(CredentialRateThrottle().get_cache_key(clock.request, None))
    assert record == [int(start) + 28, [[int(start) + s, 100] for s in range(10)]]

    assert clock.ask(start + 59.99)[0] is False
    for n in range(100):
        assert clock.ask(start + 60 + n / 1000)[0], n
    assert clock.ask(start + 60.5)[0] is False


# Whole-second gaps as well as any: the rule's edges are at whole seconds.
_GAPS = st.one_of(st.integers(min_value=0, max_value=30).map(float), st.floats(min_value=0.0, max_value=7.0))


@given(gaps=st.lists(_GAPS, min_size=1, max_size=200))
@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_never_more_than_the_limit_in_a_minute_and_no_refusal_without_it(
    settings, support_bot, monkeypatch, gaps
):
    """Against the rule as a person would state it, counting time in whole seconds: among any
    requests let through, the first and the one ``limit`` later are a minute of seconds apart;
    and a request is refused only when ``limit`` requests were let through in the minute before it."""
    cache.clear()
    limit = 3
    settings.API_RATE_PER_MINUTE = limit
    clock = _Clocked(AgentKey.objects.get(agent=support_bot.agent), monkeypatch)
    at, allowed = 1_000_000.0, []
    for gap in gaps:
        at += gap
        let_through, wait = clock.ask(at)
        if let_through:
            allowed.append(at)
        else:
            recent = [t for t in allowed if int(t) > int(at) - 60]
            assert len(recent) >= limit, (at, allowed)
            assert 0 < wait <= 60
    for earlier, later in zip(allowed, allowed[limit:], strict=False):
        assert int(later) - int(earlier) >= 60, (earlier, later)
    assert len(cache.get(CredentialRateThrottle().get_cache_key(clock.request, None), [0, []])[1]) <= 60


@pytest.fixture(params=["local memory", "Redis"])
def throttle_cache(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The throttle's counts in the default local-memory cache, or in Redis as production keeps
    them (``CACHE_URL``) when one answers on the usual port (CI has one; a fresh machine may not)."""
    if request.param == "local memory":
        cache.clear()
        return
    from django.core.cache.backends.redis import RedisCache
    from redis.exceptions import ConnectionError as RedisDown

    # A prefix of its own: nothing else in that Redis is read, counted or cleared.
    redis = RedisCache("redis://127.0.0.1:6379/0", {"KEY_PREFIX": f"test-rate-{uuid.uuid4().hex}"})
    try:
        redis.get("reachable")
    except RedisDown:
        pytest.skip("no Redis on 127.0.0.1:6379")
    monkeypatch.setattr(CredentialRateThrottle, "cache", redis)


def test_requests_sent_together_are_let_through_no_more_than_the_limit(
    settings, support_bot, monkeypatch, throttle_cache
):
    """Eight threads of one key, all in one second. DRF's throttle read the count, added one
    and wrote it back, so requests sent together wrote over each other's counts: the key was
    let through about three times its limit (4.6 times with the threads sharing Redis). Each
    request now takes its place with the cache's atomic increment (Redis's INCR)."""
    settings.API_RATE_PER_MINUTE = 50
    clock = _Clocked(AgentKey.objects.get(agent=support_bot.agent), monkeypatch)
    together = Barrier(8)

    def send() -> list[tuple[bool, float]]:
        together.wait()
        return [clock.ask(1_000_000.5) for _ in range(25)]

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: a race shows every time
    try:
        with ThreadPoolExecutor(8) as pool:
            answers = [answer for sent in pool.map(lambda _: send(), range(8)) for answer in sent]
    finally:
        sys.setswitchinterval(switching)
    assert sum(allowed for allowed, _ in answers) == 50
    # Every refusal waits for the minute to pass (all fifty came in one second).
    assert [wait for allowed, wait in answers if not allowed] == [pytest.approx(59.5)] * 150
    # Neither the refused nor the counted are lost: the next second finds all fifty.
    assert clock.ask(1_000_001.2) == (False, pytest.approx(58.8))
