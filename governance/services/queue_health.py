"""The review SLA's state changes: a breach starts (announced once) and ends.

A project's ``review_sla_breached_at`` is set when its oldest waiting write
passes the SLA and cleared when nothing late waits any more; the email goes
out only when the mark is set, so each breach is announced once however often
the check runs. Both changes are audited in their own transaction.
"""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from governance.models import Membership, Project
from governance.models.projects import Role
from governance.selectors.queue_health import QueueHealth, queue_health
from governance.services import audit

ACTOR = "system:review-sla"


def check_review_sla(project_id: int) -> str:
    """ "breached" (newly, and notified), "recovered", or "unchanged"."""
    now = timezone.now()
    with transaction.atomic():
        # The lock makes two overlapping checks agree: only one sets the mark and sends.
        project = Project.objects.select_for_update().filter(pk=project_id).first()
        if project is None:
            return "unchanged"
        [health] = queue_health(Project.objects.filter(pk=project_id), now=now)
        if health.breached and project.review_sla_breached_at is None:
            project.review_sla_breached_at = now
            project.save(update_fields=["review_sla_breached_at"])
            audit.record(
                project,
                "review_sla.breached",
                project,
                reason=f"The oldest write has waited {health.waited}; the limit is {health.sla_minutes} min.",
                actor=ACTOR,
                data={"sla_minutes": health.sla_minutes, "oldest_waiting_at": _iso(health)},
            )
            transaction.on_commit(lambda: _enqueue_notice(project_id))
            return "breached"
        if not health.breached and project.review_sla_breached_at is not None:
            project.review_sla_breached_at = None
            project.save(update_fields=["review_sla_breached_at"])
            audit.record(
                project, "review_sla.recovered", project, reason="No write waits past the limit.", actor=ACTOR
            )
            return "recovered"
    return "unchanged"


def _iso(health: QueueHealth) -> str | None:
    return health.oldest_waiting_at.isoformat() if health.oldest_waiting_at else None


def _enqueue_notice(project_id: int) -> None:
    from governance.tasks import send_review_sla_notice

    send_review_sla_notice.delay(project_id)


def send_review_sla_notice(project_id: int) -> int:
    """Email the project's admins (and the configured addresses) that its queue is late.

    Sent only while the breach is still marked, so a breach that ended before
    the task ran sends nothing. Returns the number of recipients.
    """
    project = Project.objects.filter(pk=project_id, review_sla_breached_at__isnull=False).first()
    if project is None:
        return 0
    [health] = queue_health(Project.objects.filter(pk=project_id))
    admins = Membership.objects.filter(project=project, role=Role.ADMIN).exclude(user__email="")
    recipients = sorted({*admins.values_list("user__email", flat=True), *settings.REVIEW_SLA_NOTIFY_EMAILS})
    if not recipients:
        return 0
    send_mail(
        subject=f"[{project.slug}] Review queue is late",
        message=(
            f"The oldest write waiting for review in {project.name} "
            f"has waited {health.waited or 'too long'}, "
            f"longer than the {health.sla_minutes}-minute limit.\n\n"
            "Open the review queue in the console to catch up. You will hear again only after the "
            "queue has caught up and falls behind once more."
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=recipients,
    )
    return len(recipients)
