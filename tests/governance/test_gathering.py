"""Hand-offs to the worker gathered per process for a moment (governance/gathering.py)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from governance import gathering
from governance.gathering import Gathering
from memoryadmin.celery import app


class Sent:
    """What a gathering handed over, call by call, with a way to wait for a call."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []
        self.arrived = threading.Event()

    def __call__(self, items: list[Any]) -> None:
        self.calls.append(items)
        self.arrived.set()

    def wait(self, timeout: float = 5.0) -> None:
        assert self.arrived.wait(timeout), "nothing was sent"
        self.arrived.clear()


@pytest.fixture
def gathered(settings: Any) -> None:
    """Tasks sent through the broker (not eager) and a short moment."""
    settings.TASK_GATHER_MS = 150
    app.conf.task_always_eager = False  # the autouse fixture puts it back


def test_items_of_one_moment_are_sent_once_together_in_order(gathered: None) -> None:
    sent = Sent()
    seals = Gathering("test", sent)
    for item in (3, 1, 3, 2, 1):
        seals.add(item)
    assert sent.calls == []
    sent.wait()
    assert sent.calls == [[3, 1, 2]]


def test_an_item_after_the_moment_starts_the_next_one(gathered: None) -> None:
    sent = Sent()
    seals = Gathering("test", sent)
    seals.add("a")
    sent.wait()
    seals.add("b")
    sent.wait()
    assert sent.calls == [["a"], ["b"]]


def test_no_moment_or_eager_tasks_send_each_item_at_once(settings: Any) -> None:
    sent = Sent()
    seals = Gathering("test", sent)
    seals.add("eager")  # the suite's tasks are eager by default
    settings.TASK_GATHER_MS = 0
    app.conf.task_always_eager = False
    seals.add("no moment")
    assert sent.calls == [["eager"], ["no moment"]]


def test_a_send_that_fails_is_logged_and_the_next_moment_still_sends(
    gathered: None, caplog: pytest.LogCaptureFixture
) -> None:
    sent = Sent()
    failures = iter([RuntimeError("broker down")])

    def flaky(items: list[Any]) -> None:
        failure = next(failures, None)
        if failure is not None:
            sent.arrived.set()
            raise failure
        sent(items)

    seals = Gathering("test", flaky)
    seals.add("lost")
    sent.wait()
    time.sleep(0.05)  # let the failing timer finish logging
    seals.add("kept")
    sent.wait()
    assert sent.calls == [["kept"]]
    assert "Could not hand 1 test item(s) to the worker" in caplog.text


def test_a_send_that_hangs_holds_one_thread_and_the_next_send_takes_what_arrived_meanwhile(
    gathered: None,
) -> None:
    # A broker that accepts connections and never answers holds the hand-off;
    # what the process commits meanwhile must neither start a thread per moment
    # nor be lost.
    release = threading.Event()
    sent = Sent()

    def hanging(items: list[Any]) -> None:
        if not sent.calls:
            sent.calls.append(items)
            release.wait(10)
            return
        sent(items)

    seals = Gathering("test", hanging)
    seals.add(1)
    time.sleep(0.3)  # the first send is hanging now
    threads = threading.active_count()
    for item in (2, 3, 4):
        seals.add(item)
        time.sleep(0.2)  # past a moment each time
    assert threading.active_count() == threads
    release.set()
    sent.wait()
    assert sent.calls == [[1], [2, 3, 4]]


def test_flush_sends_what_waits_at_once(gathered: None) -> None:
    sent = Sent()
    seals = Gathering("test", sent)
    seals.add(1)
    seals.flush()
    assert sent.calls == [[1]]
    time.sleep(0.3)  # the cancelled timer sends nothing more
    assert sent.calls == [[1]]


def test_a_forked_child_gathers_on_its_own(gathered: None) -> None:
    # The parent's timer thread does not exist in a child (gunicorn and Celery
    # fork their workers); without the reset after fork, the child would wait
    # for it forever and never send.
    seals: Gathering[str] = Gathering("test", lambda items: None)
    seals.add("parent's")
    read_end, write_end = os.pipe()

    def child_send(items: list[Any]) -> None:
        os.write(write_end, ",".join(items).encode())

    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            seals._send = child_send
            seals.add("child's")
            time.sleep(1)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        answer = os.read(read_end, 100).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert answer == "child's"
    assert gathering._ALL  # the gathering is known to the reset
