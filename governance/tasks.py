"""Celery tasks: each takes ids, re-fetches, exits quietly when there is nothing to do."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TypedDict

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from governance.selectors import queue_health as queue_health_selectors
from governance.services import audit as audit_service
from governance.services import checkpoints as checkpoint_service
from governance.services import conflicts as conflict_service
from governance.services import embeddings as embedding_service
from governance.services import erasure as erasure_service
from governance.services import facts as fact_service
from governance.services import feed as feed_service
from governance.services import queue_health as queue_health_service
from governance.services import replay as replay_service
from governance.services import retention as retention_service
from governance.services import verification as verification_service
from governance.services import writes as write_service

logger = logging.getLogger(__name__)


class RetryOptions(TypedDict):
    autoretry_for: tuple[type[BaseException], ...]
    retry_backoff: int
    retry_backoff_max: int
    retry_jitter: bool


class TimeLimits(TypedDict):
    soft_time_limit: int
    time_limit: int


# Two kinds of retry, each with exponential, jittered backoff (``first`` seconds,
# doubling up to ``longest``).
def retry_on_any_error(*, first: int = 2, longest: int = 300) -> RetryOptions:
    """Work that any hiccup may interrupt (a model, a mail server, the database) is
    retried on every error: a hiccup delays it, never loses it."""
    return RetryOptions(
        autoretry_for=(Exception,), retry_backoff=first, retry_backoff_max=longest, retry_jitter=True
    )


def retry_on_lost_database(*, longest: int = 60) -> RetryOptions:
    """Jobs that record their own failures (replay, erasure, evaluation, feed) retry only
    a lost database: any other failure would happen again."""
    return RetryOptions(
        autoretry_for=(OperationalError, InterfaceError),
        retry_backoff=2,
        retry_backoff_max=longest,
        retry_jitter=True,
    )


def time_limits(soft: int, hard: int) -> TimeLimits:
    """A task's time limits in seconds: the soft one raises inside the task, the hard one kills it."""
    return TimeLimits(soft_time_limit=soft, time_limit=hard)


# Time limits (soft, hard) in seconds, per task; settings hold the default.
# One embedding is a fraction of a second on the CPU, an HTTP provider a few
# seconds; a 10,000-event replay takes minutes.
EMBED_TIME_LIMITS = time_limits(60, 90)
SWEEP_TIME_LIMITS = time_limits(240, 300)
REPLAY_TIME_LIMITS = time_limits(1200, 1260)
# One sweep sends at most this many embedding tasks; the next sweep goes on
# from the oldest left, so a long broker outage is caught up over a few.
SWEEP_MAX_FACTS = 10_000
# Forgetting a person (the bulk queue, by its erase_* name): bench/erasure.py times 5,000 facts.
ERASURE_TIME_LIMITS = time_limits(1800, 1860)


@shared_task(
    name="governance.tasks.embed_fact",
    **EMBED_TIME_LIMITS,
    **retry_on_any_error(),
    max_retries=8,
)
def embed_fact(fact_id: int) -> bool:
    stored = embedding_service.embed_fact(fact_id)
    # A plain statement's write was answered before the guard's meaning model
    # read it (R5): it reads it now, reusing the vector just stored.
    write_service.complete_meaning_checks([fact_id])
    if stored:
        # With its vector stored, the fact can be compared by similarity with
        # the person's other facts (services/conflicts.py); a task of its own,
        # so a failure there retries the check, not the embedding.
        check_conflicts.delay(fact_id)
    return stored


@shared_task(
    name="governance.tasks.embed_facts",
    **EMBED_TIME_LIMITS,
    **retry_on_any_error(),
    max_retries=8,
)
def embed_facts(fact_ids: list[int]) -> int:
    """``embed_fact`` for a batch of writes' new facts, with one model call; how many were stored."""
    stored = embedding_service.embed_facts(fact_ids)
    write_service.complete_meaning_checks(fact_ids)
    for fact_id in stored:
        check_conflicts.delay(fact_id)
    return len(stored)


@shared_task(
    name="governance.tasks.check_conflicts",
    **EMBED_TIME_LIMITS,
    **retry_on_any_error(),
    max_retries=5,
)
def check_conflicts(fact_id: int) -> int:
    """Similar facts of the same person giving a different value go to a reviewer; how many."""
    return len(conflict_service.check_similar_facts(fact_id))


@shared_task(
    name="governance.tasks.embed_missing_facts",
    **SWEEP_TIME_LIMITS,
)
def embed_missing_facts() -> int:
    """Beat safety net: facts whose on-commit task was lost get embedded here (and read by the
    guard's meaning model, when their write was answered before it read them).

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
    **SWEEP_TIME_LIMITS,
    **retry_on_any_error(),
    max_retries=3,
)
def expire_facts() -> int:
    """Beat sweep (R8 expiration). Idempotent: a second run finds nothing left to expire,
    so a retry or an overlapping run does no harm."""
    return fact_service.expire_due_facts()


@shared_task(
    name="governance.tasks.run_replay",
    **REPLAY_TIME_LIMITS,
    # Only a lost database is worth retrying; any other failure is recorded on
    # the job by the service, and running it again would fail the same way.
    **retry_on_lost_database(),
    max_retries=3,
)
def run_replay(job_id: str) -> bool:
    """What-if replay of a policy draft (issue 5); the job row carries progress and result."""
    return replay_service.run(job_id)


@shared_task(
    name="governance.tasks.verify_audit_chain",
    **REPLAY_TIME_LIMITS,
    **retry_on_lost_database(),
    max_retries=3,
)
def verify_audit_chain(job_id: str) -> bool:
    """An auditor's "verify chain" (services.verification); the job row carries the result."""
    return verification_service.run(job_id)


@shared_task(
    name="governance.tasks.seal_audit_chain",
    **EMBED_TIME_LIMITS,
    **retry_on_lost_database(),
    max_retries=3,
)
def seal_audit_chain(project_id: int | None) -> int:
    """Right after a commit that recorded audit entries: seal them into the project's chain."""
    return audit_service.seal(project_id)


@shared_task(
    name="governance.tasks.seal_audit_chains",
    **SWEEP_TIME_LIMITS,
    **retry_on_lost_database(),
    max_retries=3,
)
def seal_audit_chains() -> int:
    """Beat (every ``AUDIT_SEAL_SECONDS``): seal what no per-commit task sealed (a lost task,
    a broker that was down); idempotent, and quick when nothing waits."""
    return audit_service.seal_all()


@shared_task(
    name="governance.tasks.checkpoint_audit",
    **SWEEP_TIME_LIMITS,
    **retry_on_lost_database(),
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
    **ERASURE_TIME_LIMITS,
    # Each batch commits on its own and the next run picks only what is left,
    # so a retry after a lost database resumes instead of starting over.
    **retry_on_lost_database(),
    max_retries=5,
)
def erase_principal(job_id: str) -> bool:
    """Forget a person (issue 18); the job row carries progress and, at the end, the receipt."""
    return erasure_service.run(job_id)


@shared_task(
    name="governance.tasks.run_evaluation",
    **REPLAY_TIME_LIMITS,
    **retry_on_lost_database(),
    max_retries=3,
)
def run_evaluation(run_id: int) -> bool:
    """A memory-quality run started from the console; the run row carries progress and results."""
    from governance.services import evaluations

    return evaluations.execute_run(run_id) is not None


@shared_task(
    name="governance.tasks.check_review_slas",
    **SWEEP_TIME_LIMITS,
)
def check_review_slas() -> int:
    """Beat sweep: one check per project whose review SLA state may change."""
    ids = queue_health_selectors.projects_to_check()
    for project_id in ids:
        check_review_sla.delay(project_id)
    return len(ids)


@shared_task(
    name="governance.tasks.check_review_sla",
    **retry_on_any_error(),
    max_retries=3,
)
def check_review_sla(project_id: int) -> str:
    return queue_health_service.check_review_sla(project_id)


@shared_task(
    name="governance.tasks.send_review_sla_notice",
    # A notice is worth waiting for: wider spacing, so a mail server has time to recover.
    **retry_on_any_error(first=5, longest=600),
    max_retries=5,
)
def send_review_sla_notice(project_id: int) -> int:
    return queue_health_service.send_review_sla_notice(project_id)


FEED_TIME_LIMITS = time_limits(60, 90)


@shared_task(
    name="governance.tasks.deliver_feed",
    **FEED_TIME_LIMITS,
    # Acknowledged after the attempt: a worker killed mid-delivery leaves the
    # message to be redelivered, and the delivery row still pending for the sweep.
    acks_late=True,
    reject_on_worker_lost=True,
    **retry_on_lost_database(),
    max_retries=3,
)
def deliver_feed(delivery_id: int) -> str | None:
    """One attempt at one webhook delivery; failures are rescheduled on the row, not here."""
    return feed_service.deliver(delivery_id)


@shared_task(
    name="governance.tasks.sweep_feed",
    **SWEEP_TIME_LIMITS,
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
    **SWEEP_TIME_LIMITS,
    acks_late=True,
    # Celery's default cap (10 minutes) between retries, not the minute of the others.
    **retry_on_lost_database(longest=600),
    max_retries=3,
)
def sink_feed() -> int:
    return feed_service.sink_pending()


@shared_task(
    name="governance.tasks.retrieval_upkeep",
    # Expiring a month counts and unlinks a month of events: longer than a sweep.
    # Each month is its own transaction, so a run cut short loses nothing.
    **REPLAY_TIME_LIMITS,
    **retry_on_lost_database(),
    max_retries=3,
)
def retrieval_upkeep() -> dict[str, object]:
    """Beat, daily: the retrieval log's coming monthly partitions, and expiry of the months
    past ``settings.RETRIEVAL_RETENTION_DAYS``, each recorded in the audit trail first.
    Idempotent: a partition is made once, a month is dropped once (one transaction each)."""
    done = retention_service.run_upkeep()
    if done.expired:
        logger.info("Retrieval events expired: %s", done.expired)
    return {"created": done.created, "expired": done.expired}
