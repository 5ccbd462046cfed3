"""Small helpers for tests."""

from __future__ import annotations

import time
from typing import Any


def wait_until(predicate: Any, timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll until ``predicate()`` is truthy; return its value or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def run_async(coroutine: Any) -> Any:
    """Run a coroutine to the end from a synchronous test.

    Playwright's sync API keeps an event loop running in the main thread for the
    rest of the session, where ``asyncio.run`` refuses to start; a thread of its
    own always has none.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def candidate(retrieval_id: int, fact_id: int) -> Any:
    """How retrieval ``retrieval_id`` recorded fact ``fact_id`` among its candidates (R14)."""
    from governance.models import RetrievalEvent

    event = RetrievalEvent.objects.get(pk=retrieval_id)
    [found] = [c for c in event.candidates if c.fact_id == fact_id]
    return found
