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
