"""Hand-offs to the worker, gathered per process for a moment and sent together (issue 13).

Each committed write used to hand the broker two tasks of its own: seal the
audit chain, embed the new fact. At volume that was a tenth of a write's time
in the web process (about 1 ms per hand-off with the filesystem broker), and
one worker task per write for work that goes as well, or better, in bulk. A
``Gathering`` keeps what the commits of the next ``TASK_GATHER_MS`` ask for
and hands it over in one call when that time is up: the seal of each project
once, the new facts' embeddings in one task.

What this costs, and why it is safe:

- The work starts up to ``TASK_GATHER_MS`` (default 500) later than it did.
- What a process gathered and had not sent when it died (SIGKILL, a crash)
  is not lost: the rows are the outbox. The beat's sweeps seal every chain
  every ``AUDIT_SEAL_SECONDS`` and embed facts left without a vector
  (``embed_missing_facts``), as they always did for a lost task.
- On a normal exit the interpreter waits for the pending hand-off (the timer
  is not a daemon thread), so it is sent.
- With eager tasks (tests, ``CELERY_TASK_ALWAYS_EAGER``) or ``TASK_GATHER_MS``
  of 0 every item is sent at once, as before.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=Hashable)

_ALL: weakref.WeakSet[Gathering[object]] = weakref.WeakSet()


class Gathering(Generic[T]):
    """Items added during one window, handed to ``send`` together (in the order added, once each)."""

    def __init__(self, name: str, send: Callable[[list[T]], None]) -> None:
        self.name = name
        self._send = send
        self._lock = threading.Lock()
        self._items: dict[T, None] = {}
        self._timer: threading.Timer | None = None
        _ALL.add(self)  # type: ignore[arg-type]  # items of any type; only reset() is called through it

    def add(self, item: T) -> None:
        window = _window_seconds()
        if window <= 0 or _eager():
            self._send([item])
            return
        with self._lock:
            self._items[item] = None
            if self._timer is None:
                self._arm(window)

    def flush(self) -> None:
        """Send what waits now, from the calling thread (tests; a process about to stop)."""
        self._send_waiting()

    def _arm(self, window: float) -> None:
        # Under the lock. One timer at a time, and none while it sends: a broker
        # that hangs holds one thread per gathering, not one per moment.
        self._timer = threading.Timer(window, self._on_timer)
        self._timer.name = f"gathering-{self.name}"
        self._timer.start()

    def _on_timer(self) -> None:
        self._send_waiting()
        with self._lock:
            if self._items:  # added while this thread was sending
                self._arm(max(_window_seconds(), 0.01))
            else:
                self._timer = None

    def _send_waiting(self) -> None:
        with self._lock:
            items = list(self._items)
            self._items.clear()
        if not items:
            return
        try:
            self._send(items)
        except Exception:
            # The changes have committed; the beat's sweeps pick up what this
            # hand-off would have started (module docstring).
            logger.exception(
                "Could not hand %d %s item(s) to the worker; the beat's sweep will.", len(items), self.name
            )

    def _reset(self) -> None:
        # In a forked child the parent's timer thread does not exist: forget
        # it (and the parent's items, which the parent sends) so this process
        # arms its own.
        self._lock = threading.Lock()
        self._items = {}
        self._timer = None


def _window_seconds() -> float:
    from django.conf import settings

    return max(0, int(getattr(settings, "TASK_GATHER_MS", 0))) / 1000


def _eager() -> bool:
    # The project's app, as the tasks' senders use it. celery.current_app is
    # kept per thread, and asking it instead failed three of the gathering's
    # tests in tests/governance/services/.
    from memoryadmin.celery import app

    return bool(app.conf.task_always_eager)


def _reset_all_after_fork() -> None:
    for gathering in list(_ALL):
        gathering._reset()


os.register_at_fork(after_in_child=_reset_all_after_fork)
