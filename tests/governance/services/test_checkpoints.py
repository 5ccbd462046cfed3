"""Signed checkpoints of the audit chains' heads: written by beat and on demand, exported."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import ProgrammingError, transaction

from governance import tasks
from governance.models import AuditCheckpoint, AuditEntry
from governance.services import checkpoints
from tests.governance.review_helpers import propose


@pytest.fixture
def chains(project: Any, support_bot: Any, outsider_bot: Any) -> None:
    propose(support_bot, "Prefers to be called Sam")
    propose(outsider_bot, "Works night shifts")


def heads() -> dict[int | None, tuple[int, str]]:
    rows = AuditEntry.objects.order_by("project_id", "-sequence").distinct("project_id")
    return {e.project_id: (e.sequence, e.entry_hash) for e in rows}


@pytest.mark.django_db
def test_beat_task_signs_each_head_once_and_appends_it_to_the_configured_file(
    chains: None, settings: Any, tmp_path: Path
) -> None:
    settings.AUDIT_CHECKPOINT_FILE = str(tmp_path / "trail.jsonl")

    assert tasks.checkpoint_audit.delay().get() == len(heads())
    assert tasks.checkpoint_audit.delay().get() == 0  # nothing moved, nothing new to sign

    lines = [json.loads(line) for line in (tmp_path / "trail.jsonl").read_text().splitlines()]
    assert {line["project"]: (line["sequence"], line["entry_hash"]) for line in lines} == heads()
    assert {line["project_slug"] for line in lines} == {"acme", "globex"}
    assert all(head.signed_correctly for head in checkpoints.read_file(tmp_path / "trail.jsonl"))


@pytest.mark.django_db
def test_a_moved_head_gets_a_new_checkpoint(chains: None, support_bot: Any, project: Any) -> None:
    checkpoints.write_checkpoints()
    propose(support_bot, "Allergic to peanuts")

    created = checkpoints.write_checkpoints()

    assert [(c.project_id, c.sequence) for c in created] == [(project.pk, heads()[project.pk][0])]


@pytest.mark.django_db
def test_signature_depends_on_the_key(chains: None, settings: Any) -> None:
    [checkpoint, *_] = checkpoints.write_checkpoints()
    assert checkpoints.SignedHead.of(checkpoint).signed_correctly

    settings.AUDIT_CHECKPOINT_KEY = "another key"

    assert not checkpoints.SignedHead.of(checkpoint).signed_correctly


@pytest.mark.django_db
def test_command_prints_what_it_signed_and_exports_every_chain(chains: None, tmp_path: Path) -> None:
    out = StringIO()
    call_command("checkpoint_audit", "--export", str(tmp_path / "c.jsonl"), stdout=out)
    call_command("checkpoint_audit", "--export", str(tmp_path / "c.jsonl"), stdout=out)

    text = out.getvalue()
    assert "Signed 2 new checkpoint(s)" in text
    assert "project acme: up to entry #" in text
    assert "nothing new to sign" in text
    # The export is a full baseline each time the command runs.
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 4


@pytest.mark.django_db
def test_checkpoints_are_append_only(chains: None) -> None:
    [checkpoint, *_] = checkpoints.write_checkpoints()

    with pytest.raises(ProgrammingError, match="Cannot"), transaction.atomic():
        AuditCheckpoint.objects.filter(pk=checkpoint.pk).update(sequence=1)
    with pytest.raises(ProgrammingError, match="Cannot"), transaction.atomic():
        AuditCheckpoint.objects.filter(pk=checkpoint.pk).delete()
