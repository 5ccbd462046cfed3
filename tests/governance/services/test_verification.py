"""services.verification: the console's "verify chain" runs verify_audit's checks for one project (R15)."""

from __future__ import annotations

from typing import Any

import pytest

from governance.models import AuditEntry, Job
from governance.services import audit, reviews
from governance.services.verification import JOB_KIND, start_verification
from tests.governance.database_helpers import tamper
from tests.governance.review_helpers import PENDING, propose

pytestmark = pytest.mark.django_db(transaction=True)


def verified(project, user) -> tuple[Job, dict[str, Any]]:
    job = start_verification(project, user=user)
    # Eager Celery in tests: the task ran when the job's transaction committed.
    job.refresh_from_db()
    assert job.result is not None, job.error
    return job, job.result


def test_an_intact_chain_is_reported_in_words_with_what_was_checked(project, support_bot, reviewer, auditor):
    write = propose(support_bot, PENDING)
    reviews.decide(write.pk, reviews.Decision("approve", "Fine"), reviewer=reviewer)

    job, result = verified(project, auditor)

    assert (job.kind, job.status, job.created_by) == (JOB_KIND, "succeeded", auditor)
    assert result["intact"] is True
    entries = AuditEntry.objects.filter(project=project).count()
    # The request itself is an audit entry, written before the walk.
    assert result["entries"] == entries
    assert f"all {entries} entries link to each other" in result["summary"]
    assert "No signed checkpoint exists yet" in result["summary"]
    asked = AuditEntry.objects.get(project=project, action="audit.verification_requested")
    assert asked.actor_user == auditor


def test_an_edited_entry_is_named_and_the_chain_reported_broken(project, support_bot, reviewer, auditor):
    write = propose(support_bot, PENDING)
    reviews.decide(write.pk, reviews.Decision("approve", "Fine"), reviewer=reviewer)
    victim = AuditEntry.objects.get(project=project, action="write.approve")
    tamper("UPDATE governance_auditentry SET reason = %s WHERE id = %s", ["nothing to see", victim.pk])

    _, result = verified(project, auditor)

    assert result["intact"] is False
    assert result["sequence"] == victim.sequence
    assert result["summary"].startswith(f"The audit chain is broken at entry {victim.sequence}")
    assert "content does not match its hash" in result["summary"]


def test_another_projects_damage_does_not_fail_this_project(project, other_project, outsider_bot, auditor):
    write = propose(outsider_bot, PENDING)
    victim = AuditEntry.objects.filter(project=other_project, object_id=str(write.pk)).first()
    assert victim is not None
    tamper("UPDATE governance_auditentry SET reason = %s WHERE id = %s", ["edited", victim.pk])

    assert verified(project, auditor)[1]["intact"] is True
    assert verified(other_project, auditor)[1]["intact"] is False


def test_entries_that_waited_too_long_to_be_sealed_are_a_warning_in_words(
    project, support_bot, auditor, monkeypatch, settings
):
    propose(support_bot, PENDING)
    monkeypatch.setattr(audit, "_enqueue_seal", lambda project_id: None)  # the seal tasks are lost
    propose(support_bot, "Mentioned they cycle to work")
    settings.AUDIT_SEAL_OVERDUE_SECONDS = 0

    _, result = verified(project, auditor)

    assert result["intact"] is True
    assert "still waiting to be added to the chain" in result["warning"]
    assert not AuditEntry.objects.filter(project=project, sequence__isnull=True).exists()
