"""Behind PgBouncer in transaction mode: no session state outlives a transaction.

PgBouncer lends a server connection for one transaction; whatever a statement
leaves on the session (a ``SET``, an advisory lock, a ``LISTEN``, a held
cursor, a temporary table, a prepared statement) is then seen by another
client's transaction, or lost before the next one. The scan below fails when
such a statement enters the code; the last test runs a retrieval and a write
through a real PgBouncer in transaction mode, when one is installed.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from memoryadmin import embedded_db

ROOT = Path(__file__).resolve().parents[2]
# The application's code and migrations. bench/ seeds its own database directly,
# never through PgBouncer, and may set session state there.
SCANNED = ("governance", "memoryadmin")

# Session-level statements, as they would appear in a SQL string.
SESSION_STATE = [
    # SQL keywords are written in capitals here; "Set with ..." in prose is not a statement.
    (re.compile(r"^\s*SET\s+(?!LOCAL\b|CONSTRAINTS\b|TRANSACTION\b)"), "SET without LOCAL"),
    (re.compile(r"^\s*RESET\s"), "RESET"),
    (re.compile(r"\bset_config\s*\([^)]*,\s*(false|%s)\s*\)", re.I), "set_config(..., false)"),
    (re.compile(r"\bpg_(try_)?advisory_lock(_shared)?\s*\(", re.I), "session advisory lock"),
    (re.compile(r"^\s*(UN)?LISTEN\s"), "LISTEN"),
    (re.compile(r"\bWITH\s+HOLD\b", re.I), "WITH HOLD cursor"),
    (re.compile(r"\bCREATE\s+(GLOBAL\s+|LOCAL\s+)?TEMP(ORARY)?\s+TABLE\b", re.I), "temporary table"),
    (re.compile(r"^\s*(PREPARE|DEALLOCATE)\s"), "prepared statement"),
]
# Python that turns on session state in the driver.
DRIVER_STATE = re.compile(r"\b(prepare_threshold|server_side_binding|withhold)\b\s*[=:]")

# (file, how the string starts): why it is harmless behind PgBouncer.
ALLOWED: dict[tuple[str, str], str] = {
    ("governance/services/erasure.py", "SET statement = ''"): "the SET clause of an UPDATE, joined on later",
    ("governance/prepared.py", "DEALLOCATE "): "prepares nothing behind PgBouncer (prepared.enabled)",
}


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every string literal; an f-string as one string, its holes as ``{}``."""
    inside_fstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inside_fstrings.add(id(value))
                parts.append(value.value if isinstance(value, ast.Constant) else "{}")
            yield node.lineno, "".join(str(part) for part in parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings:
            yield node.lineno, node.value


def _allowed(relative: str, text: str) -> bool:
    return any(relative == path and text.startswith(start) for path, start in ALLOWED)


def _findings() -> list[str]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            source = path.read_text()
            for lineno, text in _strings(ast.parse(source)):
                for pattern, what in SESSION_STATE:
                    if pattern.search(text) and not _allowed(relative, text):
                        found.append(f"{relative}:{lineno}: {what}: {text.strip()[:80]!r}")
            for lineno, line in enumerate(source.splitlines(), 1):
                if DRIVER_STATE.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{relative}:{lineno}: driver session state: {line.strip()[:80]!r}")
    return found


def test_no_statement_leaves_session_state_behind() -> None:
    assert _findings() == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    # The scan itself, on statements it must catch and the transaction-scoped ones it must leave.
    caught = [
        "SET search_path TO x",
        "SET SESSION timezone = 'UTC'",
        "SELECT set_config('memoryadmin.projects', %s, false)",
        "SELECT pg_advisory_lock(1, 2)",
        "LISTEN jobs",
        "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
        "CREATE TEMP TABLE t (id int)",
        "PREPARE q AS SELECT 1",
    ]
    left = [
        "SET LOCAL pgtrigger.ignore = '{x}'",
        "SELECT set_config('memoryadmin.projects', %s, true)",
        "SELECT pg_advisory_xact_lock(1, 2)",
        "UPDATE governance_fact SET statement = ''",
        "SET CONSTRAINTS ALL DEFERRED",
    ]
    for text in caught:
        assert any(p.search(text) for p, _ in SESSION_STATE), text
    for text in left:
        assert not any(p.search(text) for p, _ in SESSION_STATE), text


def test_pgbouncer_settings_turn_off_held_cursors(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import memoryadmin.settings as module

    monkeypatch.setenv("DATABASE_PGBOUNCER", "1")
    monkeypatch.setenv("DATABASE_REPLICA_URL", "postgresql://app@replica.internal/memoryadmin")
    try:
        reloaded = importlib.reload(module)
        assert {alias: db.get("DISABLE_SERVER_SIDE_CURSORS") for alias, db in reloaded.DATABASES.items()} == {
            "default": True,
            "replica": True,
        }
        # Django's own default, which PgBouncer needs: no server-side prepared statements.
        assert "prepare_threshold" not in reloaded.DATABASES["default"].get("OPTIONS", {})
        assert reloaded.DATABASES["replica"]["TEST"] == {"MIRROR": "default"}
    finally:
        monkeypatch.delenv("DATABASE_PGBOUNCER")
        monkeypatch.delenv("DATABASE_REPLICA_URL")
        importlib.reload(module)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def pgbouncer(transactional_db: Any) -> Iterator[int]:
    """A PgBouncer in transaction mode in front of the test server; yields its port."""
    binary = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if binary is None:
        pytest.skip("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    host = embedded_db.socket_dir(embedded_db.ensure_server())
    name = connections["default"].settings_dict["NAME"]
    user = "embedded_postgres" if os.geteuid() == 0 else None  # PgBouncer refuses to run as root
    root = Path(tempfile.mkdtemp(prefix="membouncer-"))
    port = _free_port()
    (root / "users.txt").write_text(f'"{embedded_db.APP_ROLE}" ""\n')
    (root / "pgbouncer.ini").write_text(
        f"""[databases]
{name} = host={host} dbname={name}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root / "users.txt"}
pool_mode = transaction
; One server connection: every transaction of every client takes turns on it,
; so session state left by one would be seen by the next.
default_pool_size = 1
max_client_conn = 20
logfile = {root / "pgbouncer.log"}
"""
    )
    if user:
        shutil.chown(root, user)
        for child in root.iterdir():
            shutil.chown(child, user)
    process = subprocess.Popen([binary, str(root / "pgbouncer.ini")], user=user)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, (root / "pgbouncer.log").read_text()
                assert time.monotonic() < deadline, "pgbouncer did not listen in 15 s"
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def test_a_write_and_a_retrieval_through_pgbouncer_in_transaction_mode(pgbouncer: int, project: Any) -> None:
    from django.db.backends.postgresql import base

    from tests.personas import make_agent

    bot = make_agent(project, "bouncer-bot")
    default = connections["default"]
    default.close()
    saved = dict(default.settings_dict)
    default.settings_dict.update(
        {"HOST": "127.0.0.1", "PORT": str(pgbouncer), "DISABLE_SERVER_SIDE_CURSORS": True}
    )
    # The embedded engine points every connection at the server's socket; this
    # one goes to PgBouncer, as DATABASE_URL would send it.
    default.get_connection_params = types.MethodType(  # type: ignore[method-assign]
        base.DatabaseWrapper.get_connection_params, default
    )
    try:
        with default.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone() == (embedded_db.APP_ROLE,)
        # The embedded server listens on no TCP port: this connection is PgBouncer's.
        assert default.connection is not None
        assert (default.connection.info.host, default.connection.info.port) == ("127.0.0.1", pgbouncer)
        with CaptureQueriesContext(default) as seen:
            written = bot.write("I prefer aisle seats.", ref="chat:bouncer")
            assert written["status"] == "active", written
            context = bot.retrieve("s-bouncer")["context"]
        assert "aisle seats" in context
        # Nothing prepared on a server connection another client's transaction gets next.
        assert not [q["sql"] for q in seen.captured_queries if "prepared" in q["sql"]]
    finally:
        default.close()
        del default.get_connection_params
        default.settings_dict.clear()
        default.settings_dict.update(saved)
