"""Long-lived processes settle Python's collector once they have loaded (memoryadmin/collector.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memoryadmin.collector import YOUNG_OBJECTS

ROOT = Path(__file__).resolve().parents[2]

# What the web process needs to start at all (it refuses to without secrets);
# nothing here connects to the database.
SERVING = {
    "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
    "SECRET_KEY": "collector-test-5VwqgXQ2y0m7t1Zk9Jr3LhFbC8dNsAeUoPiYxW4vTgH6RjMn",
    "TOMBSTONE_KEY": "collector-test-tombstone-Qm4Lk8Vx2Zt6Bn0Hc5Rj9Wf3Dy7Gp1Su",
    "DATABASE_URL": "postgresql://memory_app:secret@db.internal:5432/memory",
}


def collector_after(code: str) -> tuple[int, bool]:
    """After ``code`` in a new process: the young generation's threshold, and whether anything is frozen."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport gc\nprint(gc.get_threshold()[0], gc.get_freeze_count() > 0)"],
        cwd=ROOT,
        env={**os.environ, **SERVING},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    threshold, frozen = done.stdout.split()[-2:]
    return int(threshold), frozen == "True"


def test_a_process_that_only_loads_django_keeps_pythons_defaults():
    default = collector_after("pass")
    assert default[0] != YOUNG_OBJECTS and not default[1]
    assert collector_after("import django\ndjango.setup()") == default


def test_a_web_process_freezes_what_it_loaded_and_lets_the_youngest_generation_grow():
    assert collector_after("import memoryadmin.wsgi") == (YOUNG_OBJECTS, True)


def test_a_celery_pool_process_settles_its_collector_when_it_starts():
    started = (
        "import memoryadmin.celery\n"
        "from celery.signals import worker_process_init\n"
        "worker_process_init.send(sender=None)"
    )
    assert collector_after(started) == (YOUNG_OBJECTS, True)
