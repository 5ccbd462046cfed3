"""``make run``: database, migrations, optional demo data, then web, worker and beat together.

Demo data comes with demo logins whose password is published in this
repository, so it is loaded only when both hold: the database is the embedded
development one (no ``DATABASE_URL``) and someone asked for it (``DEMO=1 make
run`` or ``--demo``). The demo administrator is a project admin by membership;
no superuser is ever created here.

The same holds for DEBUG and the secrets: on the embedded development
database, and unless DEBUG is set either way, the stack runs with DEBUG=1,
and settings read SECRET_KEY and TOMBSTONE_KEY (when not in the environment)
from ``.data/local-secrets.json``, generated once, readable only by its owner.
With DATABASE_URL the stack is configured like production: without the two
secrets the system check stops it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from governance.management.commands.load_demo import DEMO_PASSWORD, DEMO_USERS
from memoryadmin import embedded_db, local_secrets

STOP_GRACE_SECONDS = 15
# gunicorn's settings for the web tier, the ones production runs (memoryadmin/gunicorn_conf.py).
WEB_CONFIG = "python:memoryadmin.gunicorn_conf"
DEMO_HINT = "No projects yet. To explore with demo data and demo logins: DEMO=1 make run"
FIRST_USER_HINT = (
    "To give someone access: python manage.py create_user_token USERNAME --role admin --project PROJECT"
)


@dataclass(frozen=True)
class DemoPlan:
    load: bool
    message: str


def local_stack_env(env: Mapping[str, str]) -> dict[str, str]:
    """What this stack adds to the environment of itself and its children: pure, tested alone."""
    if env.get("DATABASE_URL") or "DEBUG" in env:
        return {}
    return {"DEBUG": "1"}


def apply_local_stack_env(added: Mapping[str, str]) -> None:
    """Settings were read before this command ran; give this process what the children will read."""
    if not added:
        return
    os.environ.update(added)
    settings.DEBUG = True
    # The same precedence as settings.py with DEBUG on: the environment, then the local file.
    if not all(os.environ.get(name) for name in local_secrets.NAMES):
        local = local_secrets.load_or_create(settings.LOCAL_SECRETS_FILE)
        for name in local_secrets.NAMES:
            setattr(settings, name, os.environ.get(name) or local[name])


def plan_demo(env: Mapping[str, str], *, flag: bool, has_projects: bool) -> DemoPlan:
    """Whether to load the demo, and what to tell the operator: pure, so it is tested alone."""
    embedded = not env.get("DATABASE_URL")
    requested = flag or env.get("DEMO", "").strip().lower() in {"1", "true", "yes", "on"}
    if requested and not embedded:
        return DemoPlan(
            False,
            "Demo data was not loaded: it is only for the embedded development database, "
            "and DATABASE_URL is set. " + FIRST_USER_HINT,
        )
    if requested:
        return DemoPlan(True, "")
    if has_projects:
        return DemoPlan(False, "")
    return DemoPlan(False, DEMO_HINT if embedded else FIRST_USER_HINT)


def stack_commands(bin_dir: Path, bind: str) -> dict[str, list[str]]:
    """The web, worker and beat command lines of ``make run``.

    The soak and fault harness (bench/soak) starts the same processes.
    """
    return {
        "web": [
            str(bin_dir / "gunicorn"),
            # The production settings (processes, threads, keep-alive, preload):
            # the stack runs what ships, plus an access log on the terminal.
            "--config",
            WEB_CONFIG,
            "memoryadmin.wsgi",
            "--bind",
            bind,
            # Two processes on a development machine of any size, unless
            # WEB_CONCURRENCY asks (the production default is one per core).
            *([] if os.environ.get("WEB_CONCURRENCY") else ["--workers", "2"]),
            "--access-logfile",
            "-",
        ],
        "worker": [
            str(bin_dir / "celery"),
            "-A",
            "memoryadmin",
            "worker",
            # Every queue (settings.WORKER_QUEUES): one worker serves all in
            # development; production runs one per queue.
            "-Q",
            ",".join(settings.WORKER_QUEUES),
            "--loglevel",
            "INFO",
            "--concurrency",
            "1",
        ],
        "beat": [
            str(bin_dir / "celery"),
            "-A",
            "memoryadmin",
            "beat",
            "--loglevel",
            "INFO",
            "--pidfile",
            "",
        ],
    }


class Command(BaseCommand):
    help = "Run the whole product: web server, Celery worker and celery beat; Ctrl-C stops everything."
    # Checked in handle(), once the local stack's DEBUG and secrets are in place.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument(
            "--demo",
            action="store_true",
            help="Load the demo project and demo logins (embedded development database only; same as DEMO=1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from governance.models import Project

        apply_local_stack_env(local_stack_env(os.environ))
        self.check()
        embedded = not os.environ.get("DATABASE_URL")
        started_database = embedded and not embedded_db.is_running()
        connection.ensure_connection()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        plan = plan_demo(os.environ, flag=options["demo"], has_projects=Project.objects.exists())
        if plan.load:
            call_command("load_demo")
        demo_logins = plan.load or (embedded and self._demo_users_exist())
        connection.close()

        bin_dir = Path(sys.executable).parent
        bind = f"{options['host']}:{options['port']}"
        commands = stack_commands(bin_dir, bind)
        children: dict[str, subprocess.Popen[bytes]] = {}
        stopping = False

        def stop(signum: int, frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            for name, command in commands.items():
                # Own sessions: a terminal's Ctrl-C reaches only us, and we stop
                # the children in order.
                children[name] = subprocess.Popen(command, start_new_session=True)
            self._announce(options["host"], options["port"], demo_logins=demo_logins, note=plan.message)
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} exited with status {child.returncode}; stopping the rest.")
                        stopping = True
                time.sleep(0.5)
        finally:
            self._stop_children(children)
            if started_database:
                embedded_db.stop_server()
                self.stdout.write("Embedded database stopped.")
        self.stdout.write("Stopped.")

    def _demo_users_exist(self) -> bool:
        names = [username for username, _ in DEMO_USERS]
        return get_user_model()._default_manager.filter(username__in=names).exists()

    def _announce(self, host: str, port: int, *, demo_logins: bool, note: str) -> None:
        shown = "127.0.0.1" if host in {"0.0.0.0", "::"} else host
        lines = ["", f"Console:  http://{shown}:{port}/", f"API docs: http://{shown}:{port}/api/docs/"]
        if demo_logins:
            lines += [
                "Demo logins (password for all: " + DEMO_PASSWORD + "):",
                *[f"  {username:<10} {role} in the demo project" for username, role in DEMO_USERS],
            ]
        if note:
            lines.append(note)
        if settings.DEBUG:
            lines.append(
                f"Development mode (DEBUG=1, secrets in {settings.LOCAL_SECRETS_FILE}, which setup commands "
                "in another terminal share: python manage.py create_agent_key PROJECT AGENT)"
            )
        lines += ["Press Ctrl-C to stop web, worker, beat and the embedded database.", ""]
        self.stdout.write("\n".join(lines))

    def _stop_children(self, children: dict[str, subprocess.Popen[bytes]]) -> None:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
