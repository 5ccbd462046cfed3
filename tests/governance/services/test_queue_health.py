"""The review SLA: a breach is marked, audited and emailed once; it ends when the queue catches up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from governance.models import AuditEntry, Project, Write
from governance.services.queue_health import check_review_sla
from governance.tasks import check_review_slas
from tests.governance.review_helpers import PENDING, propose
from tests.personas import make_user

pytestmark = pytest.mark.django_db


def _age(write: Write, minutes: int) -> None:
    Write.objects.filter(pk=write.pk).update(created_at=timezone.now() - timedelta(minutes=minutes))


def test_a_breach_is_announced_once_and_ends_when_the_queue_catches_up(
    project, support_bot, settings, django_capture_on_commit_callbacks
) -> None:
    settings.REVIEW_SLA_NOTIFY_EMAILS = ["oncall@acme.example"]
    admin = make_user("ada", "admin", project)
    admin.email = "ada@acme.example"
    admin.save()
    Project.objects.filter(pk=project.pk).update(review_sla_minutes=30)
    write = propose(support_bot, PENDING)

    _age(write, 10)
    assert check_review_sla(project.pk) == "unchanged"
    assert mail.outbox == []

    _age(write, 45)
    with django_capture_on_commit_callbacks(execute=True):
        assert check_review_slas() == 1  # eager in tests: the sweep runs the per-project check
    with django_capture_on_commit_callbacks(execute=True):
        assert check_review_sla(project.pk) == "unchanged"  # the same breach is not announced again
    assert len(mail.outbox) == 1
    assert sorted(mail.outbox[0].to) == ["ada@acme.example", "oncall@acme.example"]
    assert "longer than the 30-minute limit" in mail.outbox[0].body
    assert AuditEntry.objects.filter(action="review_sla.breached", project=project).count() == 1

    Write.objects.filter(pk=write.pk).update(created_at=timezone.now())
    assert check_review_sla(project.pk) == "recovered"
    assert Project.objects.get(pk=project.pk).review_sla_breached_at is None
    assert AuditEntry.objects.filter(action="review_sla.recovered", project=project).count() == 1

    _age(write, 31)
    with django_capture_on_commit_callbacks(execute=True):
        assert check_review_sla(project.pk) == "breached"
    assert len(mail.outbox) == 2  # a new breach is a new notice


def test_the_default_sla_applies_when_the_project_sets_none(project, support_bot, settings) -> None:
    settings.REVIEW_SLA_MINUTES = 120
    write = propose(support_bot, PENDING)
    _age(write, 100)
    assert check_review_sla(project.pk) == "unchanged"
    _age(write, 121)
    assert check_review_sla(project.pk) == "breached"
