"""The web tier's gunicorn settings, as gunicorn itself resolves them (memoryadmin/gunicorn_conf.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from governance.management.commands.run_stack import WEB_CONFIG, stack_commands

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"


def resolved(**environment: str) -> tuple[int, dict[str, str], str]:
    """gunicorn's exit status, its resolved settings and its error output for ``environment``."""
    env = {k: v for k, v in os.environ.items() if k not in ("WEB_CONCURRENCY", "WEB_THREADS")}
    env.update(environment)
    done = subprocess.run(
        [str(GUNICORN), "--print-config", "--config", WEB_CONFIG, "memoryadmin.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    settings = {}
    for line in done.stdout.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            settings[name.strip()] = value.strip()
    return done.returncode, settings, done.stderr + done.stdout


def test_production_runs_threaded_workers_one_per_core_with_a_long_keep_alive() -> None:
    status, settings, _ = resolved()
    assert status == 0
    assert settings["workers"] == str(os.cpu_count() or 1)
    assert settings["worker_class"] == "gthread"
    assert settings["threads"] == "4"
    assert settings["preload_app"] == "True"
    # Longer than a balancer's usual 60 s idle timeout; gunicorn's own default is 2.
    assert int(settings["keepalive"]) > 60


def test_processes_and_threads_come_from_the_environment() -> None:
    status, settings, _ = resolved(WEB_CONCURRENCY="3", WEB_THREADS="2")
    assert status == 0
    assert (settings["workers"], settings["threads"]) == ("3", "2")


@pytest.mark.parametrize("value", ["0", "-2", "four", "2.5"])
def test_a_thread_count_that_is_not_a_positive_whole_number_stops_gunicorn_saying_so(value: str) -> None:
    status, _, output = resolved(WEB_THREADS=value)
    assert status != 0
    assert f"WEB_THREADS must be a whole number of at least 1, not {value!r}." in output


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "WEB_CONCURRENCY must be a whole number of at least 1, not '0'."),
        # WEB_CONCURRENCY is gunicorn's own variable: it refuses these itself,
        # before it reads the settings file.
        ("-2", "Value must be positive: -2"),
        ("four", "invalid literal for int() with base 10: 'four'"),
    ],
)
def test_a_process_count_gunicorn_cannot_use_stops_it(value: str, message: str) -> None:
    status, _, output = resolved(WEB_CONCURRENCY=value)
    assert status != 0
    assert message in output


def test_make_run_starts_gunicorn_with_the_production_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    web = stack_commands(Path("/venv/bin"), "127.0.0.1:8000")["web"]
    assert web[web.index("--config") + 1] == WEB_CONFIG
    # Two processes on a development machine of any size...
    assert web[web.index("--workers") + 1] == "2"
    # ...unless WEB_CONCURRENCY asks for another number, which the settings then read.
    monkeypatch.setenv("WEB_CONCURRENCY", "5")
    assert "--workers" not in stack_commands(Path("/venv/bin"), "127.0.0.1:8000")["web"]
