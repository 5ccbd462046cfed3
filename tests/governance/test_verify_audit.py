"""``manage.py verify_audit`` finds the first broken link of the hash chain (R15)."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from governance.models import AuditEntry
from governance.services.audit import entry_digest
from tests.governance.review_helpers import propose

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def history(project, support_bot, other_project):
    """A few dozen entries across two projects' chains."""
    for n in range(5):
        propose(support_bot, f"Mentioned they own {n + 2} bicycles")
    entries = list(AuditEntry.objects.filter(project=project).order_by("sequence"))
    assert len(entries) >= 8
    return entries


def tamper(sql: str, params: list[Any]) -> None:
    """Edit the append-only table as an attacker with database access would: triggers off."""
    with connection.cursor() as cursor:
        # Django's foreign keys are deferred; ALTER TABLE refuses while checks are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE governance_auditentry DISABLE TRIGGER ALL")
        cursor.execute(sql, params)
        cursor.execute("ALTER TABLE governance_auditentry ENABLE TRIGGER ALL")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def verify(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_audit", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_intact_chain_exits_zero_with_a_summary(history):
    status, out, _ = verify()
    assert status == 0
    total = AuditEntry.objects.count()
    assert f"Audit chain intact: {total} entries" in out


@pytest.mark.django_db
def test_edited_row_is_reported_at_that_entry(history):
    victim = history[4]
    tamper("UPDATE governance_auditentry SET reason = %s WHERE id = %s", ["nothing to see", victim.pk])

    status, out, message = verify()

    assert status == 1
    assert f"sequence={victim.sequence} entry_id={victim.pk}" in out
    assert "project=acme" in out
    assert "content does not match its hash" in out
    assert f"entry #{victim.sequence} (id {victim.pk})" in message


@pytest.mark.django_db
def test_edited_and_rehashed_row_is_reported_at_the_next_entry(history):
    victim = history[3]
    victim.reason = "approved by nobody"
    forged = entry_digest(victim)
    tamper(
        "UPDATE governance_auditentry SET reason = %s, entry_hash = %s WHERE id = %s",
        [victim.reason, forged, victim.pk],
    )

    status, out, _ = verify()

    following = history[4]
    assert status == 1
    assert f"sequence={following.sequence} entry_id={following.pk}" in out
    assert "does not link to the entry before it" in out


@pytest.mark.django_db
def test_deleted_row_is_reported_where_the_gap_is(history):
    victim = history[2]
    tamper("DELETE FROM governance_auditentry WHERE id = %s", [victim.pk])

    status, out, _ = verify()

    assert status == 1
    assert f"sequence={victim.sequence + 1} entry_id={history[3].pk}" in out
    assert f"expected entry #{victim.sequence}: a row is missing" in out


@pytest.mark.django_db
def test_project_option_checks_one_chain(history, other_project):
    tamper("UPDATE governance_auditentry SET action = 'fact.verified' WHERE id = %s", [history[1].pk])

    assert verify("--project", other_project.slug)[0] == 0
    assert verify("--project", "acme")[0] == 1
    assert verify("--project", "nope")[0] == 2


@pytest.mark.django_db(transaction=True)
def test_command_exits_non_zero_as_a_process(history):
    """The real process exit status, as an operator's cron job would see it."""
    victim = history[5]
    tamper("UPDATE governance_auditentry SET actor = 'user:mallory' WHERE id = %s", [victim.pk])
    env = dict(os.environ, DATABASE_NAME=connection.settings_dict["NAME"])

    result = subprocess.run(
        [sys.executable, "manage.py", "verify_audit"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1, result.stderr
    assert f"sequence={victim.sequence} entry_id={victim.pk}" in result.stdout
    assert "Audit chain broken in project acme" in result.stderr
