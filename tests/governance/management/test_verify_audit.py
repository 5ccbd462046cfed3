"""``manage.py verify_audit`` finds the first broken link of the hash chain (R15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from governance.models import AuditEntry
from governance.rules.audit import entry_digest
from governance.selectors.audit import verify_chain
from governance.services import audit, checkpoints
from tests.governance.database_helpers import tamper
from tests.governance.review_helpers import propose

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def history(project, support_bot, other_project):
    """A few dozen entries across two projects' chains."""
    for n in range(5):
        propose(support_bot, f"Mentioned they own {n + 2} bicycles")
    entries = list(AuditEntry.objects.filter(project=project).order_by("sequence"))
    assert len(entries) >= 8
    return entries


def verify(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_audit", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_intact_chain_exits_zero_with_a_summary(history):
    status, out, _ = verify()
    assert status == 0
    total = AuditEntry.objects.count()
    assert f"Audit chain intact: {total} entries" in out


@pytest.mark.django_db(transaction=True)
def test_edited_row_is_reported_at_that_entry(history):
    victim = history[4]
    tamper("UPDATE governance_auditentry SET reason = %s WHERE id = %s", ["nothing to see", victim.pk])

    status, out, message = verify()

    assert status == 1
    assert f"sequence={victim.sequence} entry_id={victim.pk}" in out
    assert "project=acme" in out
    assert "content does not match its hash" in out
    assert f"entry #{victim.sequence} (id {victim.pk})" in message


@pytest.mark.django_db(transaction=True)
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


@pytest.mark.django_db(transaction=True)
def test_deleted_row_is_reported_where_the_gap_is(history):
    victim = history[2]
    tamper("DELETE FROM governance_auditentry WHERE id = %s", [victim.pk])

    status, out, _ = verify()

    assert status == 1
    assert f"sequence={victim.sequence + 1} entry_id={history[3].pk}" in out
    assert f"expected entry #{victim.sequence}: a row is missing" in out


@pytest.mark.django_db(transaction=True)
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


# Signed checkpoints of the chains' heads: what the chain alone cannot show.


def rewrite_and_rehash(entries: list[AuditEntry], reason: str) -> None:
    """A database administrator's careful forgery: edit one entry, then recompute its hash
    and every later link, so that the chain on its own verifies again."""
    victim, *later = entries
    victim.reason = reason
    victim.entry_hash = entry_digest(victim)
    rows = [(victim.reason, victim.entry_hash, victim.previous_hash, victim.pk)]
    previous = victim.entry_hash
    for entry in later:
        entry.previous_hash = previous
        entry.entry_hash = entry_digest(entry)
        rows.append((entry.reason, entry.entry_hash, entry.previous_hash, entry.pk))
        previous = entry.entry_hash
    for row in rows:
        tamper(
            "UPDATE governance_auditentry SET reason = %s, entry_hash = %s, previous_hash = %s WHERE id = %s",
            list(row),
        )


@pytest.mark.django_db(transaction=True)
def test_intact_chain_with_checkpoints_exits_zero(history, tmp_path):
    exported = tmp_path / "checkpoints.jsonl"
    call_command("checkpoint_audit", "--export", str(exported), stdout=StringIO())

    status, out, _ = verify("--checkpoints", str(exported))

    assert status == 0, out
    assert "Each chain reaches its latest signed checkpoint" in out


@pytest.mark.django_db(transaction=True)
def test_without_a_checkpoint_a_cut_tail_goes_unnoticed_and_the_output_says_so(history):
    tamper("DELETE FROM governance_auditentry WHERE id = ANY(%s)", [[e.pk for e in history[-3:]]])

    status, out, _ = verify()

    assert status == 0
    assert "No signed checkpoint yet" in out


@pytest.mark.django_db(transaction=True)
def test_tail_deleted_after_a_checkpoint_is_reported_as_removed_entries(history):
    checkpoints.write_checkpoints()
    tamper("DELETE FROM governance_auditentry WHERE id = ANY(%s)", [[e.pk for e in history[-3:]]])

    status, out, message = verify()

    last_left, head = history[-4], history[-1]
    assert status == 1
    assert f"sequence={last_left.sequence} entry_id={last_left.pk}" in out
    assert f"the chain ends at entry #{last_left.sequence}" in out
    assert f"recorded entry #{head.sequence}: the last 3 entries were removed" in out
    assert "Audit chain broken in project acme" in message


@pytest.mark.django_db(transaction=True)
def test_whole_chain_deleted_after_a_checkpoint_is_reported(history, project):
    checkpoints.write_checkpoints()
    tamper("DELETE FROM governance_auditentry WHERE project_id = %s", [project.pk])

    status, out, _ = verify()

    assert status == 1
    assert "no entries remain" in out
    assert f"recorded {len(history)} entries: the whole chain was removed" in out
    assert "the whole chain was removed" in out


@pytest.mark.django_db(transaction=True)
def test_entry_rewritten_with_every_hash_recomputed_is_caught_by_the_checkpoint(history):
    checkpoints.write_checkpoints()
    rewrite_and_rehash(history[3:], "approved by nobody")
    assert verify_chain() is None  # the chain alone is fooled

    status, out, _ = verify()

    head = history[-1]
    assert status == 1
    assert f"sequence={head.sequence} entry_id={head.pk}" in out
    assert "the chain was rewritten at or before this entry" in out


@pytest.mark.django_db(transaction=True)
def test_forged_checkpoint_over_a_cut_tail_is_reported(history, project):
    checkpoints.write_checkpoints()
    tamper("DELETE FROM governance_auditentry WHERE id = ANY(%s)", [[e.pk for e in history[-2:]]])
    new_head = history[-3]
    # Without the key, the best a forger can do is replace the genuine checkpoint
    # with one for the new head and a plausible-looking signature.
    tamper("DELETE FROM governance_auditcheckpoint", [], table="governance_auditcheckpoint")
    tamper(
        "INSERT INTO governance_auditcheckpoint (project_id, sequence, entry_hash, created_at, "
        "retrievals_through, retrieval_count, signature) VALUES (%s, %s, %s, now(), 0, 0, %s)",
        [project.pk, new_head.sequence, new_head.entry_hash, "0" * 64],
        table="governance_auditcheckpoint",
    )

    status, out, _ = verify()

    assert status == 1
    assert "does not match: that checkpoint was not written by this service" in out


@pytest.mark.django_db(transaction=True)
def test_exported_file_catches_a_cut_tail_whose_checkpoints_were_deleted_too(history, tmp_path):
    exported = tmp_path / "checkpoints.jsonl"
    call_command("checkpoint_audit", "--export", str(exported), stdout=StringIO())
    tamper("DELETE FROM governance_auditentry WHERE id = ANY(%s)", [[e.pk for e in history[-2:]]])
    tamper("DELETE FROM governance_auditcheckpoint", [], table="governance_auditcheckpoint")

    assert verify()[0] == 0  # the database alone no longer knows
    status, out, _ = verify("--checkpoints", str(exported))

    assert status == 1
    assert "line " in out and "of checkpoints.jsonl" in out
    assert "the last 2 entries were removed" in out


@pytest.mark.django_db(transaction=True)
def test_edited_line_in_the_exported_file_is_reported(history, tmp_path):
    exported = tmp_path / "checkpoints.jsonl"
    call_command("checkpoint_audit", "--export", str(exported), stdout=StringIO())
    lines = exported.read_text().splitlines()
    forged = json.loads(lines[0])
    forged["sequence"] -= 2
    exported.write_text("\n".join([json.dumps(forged), *lines[1:]]) + "\n")

    status, out, _ = verify("--checkpoints", str(exported))

    assert status == 1
    assert "the signature of line 1 of checkpoints.jsonl" in out


@pytest.mark.django_db(transaction=True)
def test_unreadable_checkpoint_file_is_a_usage_error(history, tmp_path):
    garbled = tmp_path / "checkpoints.jsonl"
    garbled.write_text("not json\n")

    assert verify("--checkpoints", str(garbled))[0] == 2
    assert verify("--checkpoints", str(tmp_path / "missing.jsonl"))[0] == 2


@pytest.mark.django_db(transaction=True)
def test_entries_left_unsealed_too_long_are_a_warning_then_sealed_and_checked(
    history, project, monkeypatch, settings
):
    # The seal task queued on commit is lost (a broker outage), and beat did not run either.
    monkeypatch.setattr(audit, "_enqueue_seal", lambda project_id: None)
    with transaction.atomic():
        waiting = audit.record(project, "project.archived", project, reason="Left waiting")
    settings.AUDIT_SEAL_OVERDUE_SECONDS = 0  # anything waiting is older than the bound

    status, out, _ = verify("--project", project.slug)

    assert status == 0
    assert "WARNING 1 audit entry was still waiting to be added to the chain" in out
    assert "background worker" in out
    waiting.refresh_from_db()
    assert waiting.sequence == AuditEntry.objects.filter(project=project).count()
    assert verify_chain(project.pk) is None
    assert "WARNING" not in verify("--project", project.slug)[1]  # nothing waits any more
