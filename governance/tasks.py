"""Celery tasks: each takes ids, re-fetches, exits quietly when there is nothing to do."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from governance.selectors import queue_health as queue_health_selectors
from governance.services import checkpoints as checkpoint_service
from governance.services import conflicts as conflict_service
from governance.services import embeddings as embedding_service
from governance.services import erasure as erasure_service
from governance.services import facts as fact_service
from governance.services import feed as feed_service
from governance.services import queue_health as queue_health_service
from governance.services import replay as replay_service
from governance.services import verification as verification_service

logger = logging.getLogger(__name__)

# Retries with exponential backoff (2 s doubling to 5 min, jittered): a model
# or database hiccup delays the work, never loses it.
RETRY_FOR = (Exception,)


# Time limits (soft, hard) in seconds, per task; settings hold the default.
# One embedding is a fraction of a second on the CPU, an HTTP provider a few
# seconds; a 10,000-event replay takes minutes.
EMBED_TIME_LIMITS = (60, 90)
SWEEP_TIME_LIMITS = (240, 300)
REPLAY_TIME_LIMITS = (1200, 1260)
# One sweep sends at most this many embedding tasks; the next sweep goes on
# from the oldest left, so a long broker outage is caught up over a few.
SWEEP_MAX_FACTS = 10_000
# Forgetting a person (the bulk queue, by its erase_* name): bench/erasure.py times 5,000 facts.
ERASURE_TIME_LIMITS = (1800, 1860)


@shared_task(
    name="governance.tasks.embed_fact",
    soft_time_limit=EMBED_TIME_LIMITS[0],
    time_limit=EMBED_TIME_LIMITS[1],
    autoretry_for=RETRY_FOR,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
)
def embed_fact(fact_id: int) -> bool:
    stored = embedding_service.embed_fact(fact_id)
    if stored:
        # With its vector stored, the fact can be compared by similarity with
        # the person's other facts (services/conflicts.py); a task of its own,
        # so a failure there retries the check, not the embedding.
        check_conflicts.delay(fact_id)
    return stored


@shared_task(
    name="governance.tasks.check_conflicts",
    soft_time_limit=EMBED_TIME_LIMITS[0],
    time_limit=EMBED_TIME_LIMITS[1],
    autoretry_for=RETRY_FOR,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=5,
)
def check_conflicts(fact_id: int) -> int:
    """Similar facts of the same person giving a different value go to a reviewer; how many."""
    return len(conflict_service.check_similar_facts(fact_id))


@shared_task(
    name="governance.tasks.embed_missing_facts",
    soft_time_limit=SWEEP_TIME_LIMITS[0],
    time_limit=SWEEP_TIME_LIMITS[1],
)
def embed_missing_facts() -> int:
    """Beat safety net: facts whose on-commit task was lost get embedded here.

    Lost means the broker was down when the write committed, or restarted
    without its queue, or a worker died holding the task. The facts table is
    the outbox, so nothing else has to remember what is owed. Facts younger
    than one sweep interval are left to their own task.
    """
    grace = timedelta(seconds=settings.EMBED_SWEEP_SECONDS)
    sent = 0
    after_id = 0
    while sent < SWEEP_MAX_FACTS:
        ids = embedding_service.facts_missing_embeddings(older_than=grace, after_id=after_id)
        if not ids:
            break
        for fact_id in ids:
            embed_fact.delay(fact_id)
        sent += len(ids)
        after_id = ids[-1]
    return sent


@shared_task(
    name="governance.tasks.expire_facts",
    soft_time_limit=SWEEP_TIME_LIMITS[0],
    time_limit=SWEEP_TIME_LIMITS[1],
    autoretry_for=RETRY_FOR,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=3,
)
def expire_facts() -> int:
    """Beat sweep (R8 expiration). Idempotent: a second run finds nothing left to expire,
    so a retry or an overlapping run does no harm."""
    return fact_service.expire_due_facts()


@shared_task(
    name="governance.tasks.run_replay",
    soft_time_limit=REPLAY_TIME_LIMITS[0],
    time_limit=REPLAY_TIME_LIMITS[1],
    # Only a lost database is worth retrying; any other failure is recorded on
    # the job by the service, and running it again would fail the same way.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=3,
)
def run_replay(job_id: str) -> bool:
    """What-if replay of a policy draft (issue 5); the job row carries progress and result."""
    return replay_service.run(job_id)


@shared_task(
    name="governance.tasks.verify_audit_chain",
    soft_time_limit=REPLAY_TIME_LIMITS[0],
    time_limit=REPLAY_TIME_LIMITS[1],
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=3,
)
def verify_audit_chain(job_id: str) -> bool:
    """An auditor's "verify chain" (services.verification); the job row carries the result."""
    return verification_service.run(job_id)


@shared_task(
    name="governance.tasks.checkpoint_audit",
    soft_time_limit=SWEEP_TIME_LIMITS[0],
    time_limit=SWEEP_TIME_LIMITS[1],
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=3,
)
def checkpoint_audit() -> int:
    """Beat: sign each audit chain's head that moved, and append the new checkpoints to
    ``settings.AUDIT_CHECKPOINT_FILE`` when set. Idempotent: an unmoved head is not signed again."""
    created = checkpoint_service.write_checkpoints()
    if settings.AUDIT_CHECKPOINT_FILE:
        checkpoint_service.export(created, settings.AUDIT_CHECKPOINT_FILE)
    return len(created)


@shared_task(
    name="governance.tasks.erase_principal",
    soft_time_limit=ERASURE_TIME_LIMITS[0],
    time_limit=ERASURE_TIME_LIMITS[1],
    # Each batch commits on its own and the next run picks only what is left,
    # so a retry after a lost database resumes instead of starting over.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
)
def erase_principal(job_id: str) -> bool:
    """Forget a person (issue 18); the job row carries progress and, at the end, the receipt."""
    return erasure_service.run(job_id)


@shared_task(
    name="governance.tasks.run_evaluation",
    soft_time_limit=REPLAY_TIME_LIMITS[0],
    time_limit=REPLAY_TIME_LIMITS[1],
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=3,
)
def run_evaluation(run_id: int) -> bool:
    """A memory-quality run started from the console; the run row carries progress and results."""
    from governance.services import evaluations

    return evaluations.execute_run(run_id) is not None


@shared_task(
    name="governance.tasks.check_review_slas",
    soft_time_limit=SWEEP_TIME_LIMITS[0],
    time_limit=SWEEP_TIME_LIMITS[1],
)
def check_review_slas() -> int:
    """Beat sweep: one check per project whose review SLA state may change."""
    ids = queue_health_selectors.projects_to_check()
    for project_id in ids:
        check_review_sla.delay(project_id)
    return len(ids)


@shared_task(
    name="governance.tasks.check_review_sla",
    autoretry_for=RETRY_FOR,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=3,
)
def check_review_sla(project_id: int) -> str:
    return queue_health_service.check_review_sla(project_id)


@shared_task(
    name="governance.tasks.send_review_sla_notice",
    autoretry_for=RETRY_FOR,
    retry_backoff=5,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=5,
)
def send_review_sla_notice(project_id: int) -> int:
    return queue_health_service.send_review_sla_notice(project_id)


FEED_TIME_LIMITS = (60, 90)


@shared_task(
    name="governance.tasks.deliver_feed",
    soft_time_limit=FEED_TIME_LIMITS[0],
    time_limit=FEED_TIME_LIMITS[1],
    # Acknowledged after the attempt: a worker killed mid-delivery leaves the
    # message to be redelivered, and the delivery row still pending for the sweep.
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=3,
)
def deliver_feed(delivery_id: int) -> str | None:
    """One attempt at one webhook delivery; failures are rescheduled on the row, not here."""
    return feed_service.deliver(delivery_id)


@shared_task(
    name="governance.tasks.sweep_feed",
    soft_time_limit=SWEEP_TIME_LIMITS[0],
    time_limit=SWEEP_TIME_LIMITS[1],
)
def sweep_feed() -> int:
    """Beat: enqueue deliveries that are due (new ones whose task was lost, and retries),
    and write pending events to the file / syslog sink."""
    due = feed_service.due_deliveries()
    for delivery_id in due:
        deliver_feed.delay(delivery_id)
    feed_service.sink_pending()
    return len(due)


@shared_task(
    name="governance.tasks.sink_feed",
    soft_time_limit=SWEEP_TIME_LIMITS[0],
    time_limit=SWEEP_TIME_LIMITS[1],
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    max_retries=3,
)
def sink_feed() -> int:
    return feed_service.sink_pending()
