"""An auditor's "verify chain" from the console: the same checks as ``manage.py verify_audit``
for one project, run by a worker, the outcome kept on a job in plain words (R15).

Walking a long chain and every retrieval seal can take a while, so the request
only queues a job (with an audit entry naming who asked); the page polls it.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any
from uuid import UUID

from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from governance.models import AuditEntry, Job, Project, RetrievalEvent
from governance.models.jobs import JobStatus
from governance.rules.audit import BrokenLink
from governance.selectors.audit import verify_chain
from governance.services import audit, checkpoints

JOB_KIND = "verify_audit"
logger = logging.getLogger(__name__)


@transaction.atomic
def start_verification(project: Project, *, user: Any = None) -> Job:
    person = user if getattr(user, "pk", None) else None
    job = Job.objects.create(kind=JOB_KIND, project=project, created_by=person)
    # Named explicitly, not left to the request's context: the trail says who asked.
    audit.record(
        project,
        "audit.verification_requested",
        job,
        reason="Verify the audit chain from the console",
        actor=f"user:{person.get_username()}" if person else None,
        actor_user=person,
    )
    # After commit: the worker must find the job row when the task arrives.
    transaction.on_commit(partial(_enqueue, job.pk))
    return job


def _enqueue(job_id: UUID) -> None:
    from governance.tasks import verify_audit_chain  # governance.tasks imports this module

    verify_audit_chain.delay(str(job_id))


def run(job_id: str | UUID) -> bool:
    """Run one verification job; False when it is gone or already finished (a redelivery)."""
    job = Job.objects.filter(pk=job_id, kind=JOB_KIND).select_related("project").first()
    if job is None or job.is_finished:
        return False
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, started_at=timezone.now())
    try:
        result = verify_project(job.project)
    except (OperationalError, InterfaceError):
        raise  # the database went away: the task retries
    except Exception as exc:
        logger.exception("audit verification job %s failed", job.pk)
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        return False
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.SUCCEEDED, result=result, finished_at=timezone.now()
    )
    return True


def verify_project(project: Project) -> dict[str, Any]:
    """What ``verify_audit --project`` checks, as a result a page can put in words."""
    pid = project.pk
    # What waited to be sealed is reported as found (a sealer that stopped is
    # worth a warning), then sealed, so the check covers every committed entry.
    waiting = audit.backlog(pid, only_project=True)
    audit.seal(pid)
    warning = audit.backlog_warning(waiting)
    broken = (
        verify_chain(pid)
        or checkpoints.verify_against(pid, only_project=True)
        or checkpoints.verify_retrieval_seals(pid, only_project=True)
    )
    entries = AuditEntry.objects.filter(project=project).count()
    sealed = RetrievalEvent.objects.filter(project=project).count()
    signed = bool(checkpoints.latest_checkpoints(pid, only_project=True))
    if isinstance(broken, BrokenLink):
        where = f"entry {broken.sequence}" + ("" if broken.entry_id is None else f" (id {broken.entry_id})")
        return {
            "intact": False,
            "entries": entries,
            "retrievals": sealed,
            "signed": signed,
            "sequence": broken.sequence,
            "warning": warning,
            "summary": f"The audit chain is broken at {where}: {broken.problem}. "
            "Entries from there on cannot be trusted.",
        }
    if isinstance(broken, checkpoints.AlteredRetrieval):
        return {
            "intact": False,
            "entries": entries,
            "retrievals": sealed,
            "signed": signed,
            "retrieval": broken.event_id,
            "warning": warning,
            "summary": f"The retrieval log was changed: {broken.problem}.",
        }
    summary = (
        f"The audit chain is intact: all {entries} entries link to each other and match their hashes, "
        f"and all {sealed} retrieval events match their seals."
    )
    summary += (
        " The chain reaches its latest signed checkpoint."
        if signed
        else " No signed checkpoint exists yet, so entries cut off from the end would go unnoticed."
    )
    return {
        "intact": True,
        "entries": entries,
        "retrievals": sealed,
        "signed": signed,
        "warning": warning,
        "summary": summary,
    }
