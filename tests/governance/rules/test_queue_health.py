"""When the review queue counts as late (issue 16)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from governance.rules.queue_health import effective_sla_minutes, is_breached, waited_words

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_project_sla_overrides_the_default_and_an_empty_one_does_not() -> None:
    assert effective_sla_minutes(30, 240) == 30
    assert effective_sla_minutes(None, 240) == 240
    assert effective_sla_minutes(0, 240) == 240


def test_breached_only_past_the_limit_and_never_when_nothing_waits() -> None:
    assert not is_breached(None, NOW, 60)
    assert not is_breached(NOW - timedelta(minutes=60), NOW, 60)
    assert is_breached(NOW - timedelta(minutes=61), NOW, 60)


def test_waiting_time_reads_as_words() -> None:
    assert waited_words(NOW - timedelta(minutes=7), NOW) == "7 min"
    assert waited_words(NOW - timedelta(hours=3, minutes=20), NOW) == "3 h 20 min"
    assert waited_words(NOW - timedelta(days=2, hours=4), NOW) == "2 days 4 h"
