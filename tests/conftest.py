"""Test-wide set-up: one embedded PostgreSQL per test session, personas, a real worker, a real browser.

The data directory is a fresh temporary folder, so ``make test`` needs no
database installed and never touches the ``make run`` database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_TMP = Path(tempfile.mkdtemp(prefix="memtest-"))
os.environ["MEMORYADMIN_PGDATA"] = str(_TMP / "pgdata")
os.environ["MEMORYADMIN_PGDATA_CLEANUP"] = "delete"
# Set, not defaulted: under pytest-xdist each worker process inherits the controller's
# environment, and a worker started from it (tests/governance/services/test_feed.py) must
# listen on this process's broker folder, the one the worker fixture publishes to.
os.environ["CELERY_FILESYSTEM_BROKER_DIR"] = str(_TMP / "broker")
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop + ORM calls in tests

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytest_plugins = ["tests.personas"]


@pytest.fixture(autouse=True)
def _eager_celery(settings: Any) -> Iterator[None]:
    """Tasks run in-process unless a test asks for the real worker."""
    from celery.result import allow_join_result

    from memoryadmin.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    # Celery keeps "joining a result here would block" in one flag for the whole process,
    # which each eager call sets and then puts back as it found it. Two threads running
    # eager tasks at once (a live server's and the test's) can put it back in the wrong
    # order and leave it set, and every later .get() on an eager result in the process
    # then raises. Each test starts with it clear, as in any process that is not a worker.
    with allow_join_result():
        yield
    app.conf.task_always_eager = False


@pytest.fixture(scope="session", autouse=True)
def _flush_past_truncate_guards() -> Iterator[None]:
    """Tests that commit are cleaned up with TRUNCATE, which the application role may not
    run and the append-only tables refuse (R15). Only this test clean-up does it: as the
    owner role, the one role whose ``pgtrigger.ignore`` the append-only triggers honour."""
    import pgtrigger
    from django.db.backends.postgresql.operations import DatabaseOperations

    from memoryadmin.database_roles import as_owner

    flush = DatabaseOperations.execute_sql_flush

    def flush_as_owner(self: DatabaseOperations, sql_list: list[str]) -> None:
        with as_owner(self.connection.alias), pgtrigger.ignore():
            flush(self, sql_list)

    # Replaced for the whole test session, restored at its end.
    DatabaseOperations.execute_sql_flush = flush_as_owner  # type: ignore[method-assign,assignment]
    yield
    DatabaseOperations.execute_sql_flush = flush  # type: ignore[method-assign]  # restoring it


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Rate-limit counters live in the cache: no test inherits another's requests (nor
    another's cached project facts, should a database reuse project ids)."""
    from django.core.cache import cache

    from governance.selectors.retrievals import forget_project_facts

    cache.clear()
    forget_project_facts()
    yield
    cache.clear()


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup: Any, django_db_blocker: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``celery worker`` process on the configured broker and the test database."""
    from django.conf import settings
    from django.db import connection

    from memoryadmin.celery import app

    env = dict(os.environ, DATABASE_NAME=connection.settings_dict["NAME"], PYTHONUNBUFFERED="1")
    if settings.CELERY_BROKER_URL == "filesystem://":
        # A broker folder of this test session's own, so a `make run` worker
        # on the same checkout never takes the tests' tasks.
        broker = _TMP / "broker"
        folders = {
            "queue": broker / "queue",
            "processed": broker / "processed",
            "control": broker / "control",
        }
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        env["CELERY_FILESYSTEM_BROKER_DIR"] = str(broker)
        app.conf.broker_transport_options = {
            **app.conf.broker_transport_options,
            "data_folder_in": str(folders["queue"]),
            "data_folder_out": str(folders["queue"]),
            "processed_folder": str(folders["processed"]),
            "control_folder": str(folders["control"]),
        }
    if "DATABASE_URL" in env:
        raise RuntimeError("The worker fixture expects the embedded test database.")
    log = open(_TMP / "worker.log", "wb")  # noqa: SIM115 (closed at teardown)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "memoryadmin",
            "worker",
            "-Q",
            ",".join(settings.WORKER_QUEUES),
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while b"ready." not in (_TMP / "worker.log").read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("Celery worker did not start:\n" + (_TMP / "worker.log").read_text()[-4000:])
        time.sleep(0.2)
    yield process
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()
    (_TMP / "worker.log").unlink(missing_ok=True)


@pytest.fixture
def real_worker(celery_worker_process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """Send tasks through the broker to the worker process for this test."""
    from memoryadmin.celery import app

    app.conf.task_always_eager = False
    # A broker connection pool built earlier in the session (before the worker
    # fixture pointed the broker at this session's folder) would still publish
    # to the settings' default folder, where no test worker listens: forget it,
    # and the next publish looks up the pool for the current options (kombu
    # keys its pools by connection options; closing one would break that lookup).
    # Celery has no public way to rebuild its pools, hence the private attributes.
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]
    yield celery_worker_process
    app.conf.task_always_eager = True


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Debian's Chromium, never a downloaded browser (STACK.md)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Browser tests need Debian's chromium at {CHROMIUM}: apt-get install -y chromium")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    shutil.rmtree(_TMP / "broker", ignore_errors=True)
