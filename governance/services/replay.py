"""What-if replay: an agent's last N retrievals re-decided under its draft policy (issue 5).

``start_replay`` stores the draft with a new Job and enqueues ``run_replay``;
the task calls ``run``, which walks the events oldest first in chunks and
writes progress to the Job row as it goes, so the console's progress bar and
``GET /api/v1/admin/jobs/{id}`` see it move. A person may cancel: the run
checks ``Job.cancel_requested`` whenever it writes progress.

What each event is re-decided against (the design's "facts as they stood"):

- the event's own recorded candidates, each rebuilt from the fact's history
  row current at the event's time (status, validity, verification,
  authority, statement), never today's row; a fact not recorded yet is left
  out (``not_recorded``); a withdrawn fact's statement is erased everywhere
  (R8), so a placeholder stands in and the event is marked approximate;
- the event's session mode, identity assertion and resume hint as recorded
  (R9, R13; the hint is read back from the recorded context), with ``now``
  the event's time;
- relevance as recorded in the candidate's scores (the query is not
  embedded again);
- a later round that reused its session-start block (R12) gets the block the
  draft would have made at that session's first round, replayed too (even
  when that round is older than the window), so budgets and duplicate checks
  see what the draft would have cached; the block's items count as injected
  by every round that returned it.

What a replay does not preview: the session mode is the one recorded, so a
change of ``session_resume_days`` or ``session_confirm_days`` shows no
effect; and facts the original retrieval never fetched (per-round kinds
beyond its nearest-neighbour limit, kinds the draft newly makes session-start
memory) are not added.

The retrieval event's ``created_at`` and the history rows' ``pgh_created_at``
(the writing transaction's start) order what was known when; a write whose
transaction started before a retrieval but committed after it would count as
known, a race too narrow to matter for a preview.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from governance.models import Agent, Fact, Job, PolicyDraft, RetrievalEvent
from governance.models.jobs import JobStatus
from governance.rules import contradictions, rendering, retrieval
from governance.rules import replay as rules
from governance.rules.policy import PolicySettings
from governance.services import audit, conflicts
from memoryadmin import routers

logger = logging.getLogger(__name__)

MAX_EVENTS = 10_000
CHUNK_SIZE = 200
# Progress is written every few events or every half second, whichever
# comes first: often enough for a live bar, rarely enough not to matter.
PROGRESS_EVERY = 20
PROGRESS_SECONDS = 0.5

_EVENT_FIELDS = (
    "id",
    "created_at",
    "mode",
    "round",
    "query",
    "identity_verified",
    "context",
    "tokens_used",
    "static_block_cached",
    "session_id",
    "project",
    "principal",
)
_SNAPSHOT_FIELDS = (*retrieval.CANDIDATE_COLUMNS, "recorded_at")


class ReplayError(Exception):
    field: str | None = None


class InvalidEventCount(ReplayError):
    field = "events"

    def __init__(self) -> None:
        super().__init__(f"Replay between 1 and {MAX_EVENTS:,} events.")


class DraftRequired(ReplayError):
    def __init__(self) -> None:
        super().__init__("A replay previews the draft: save a draft first.")


class TooManyReplays(ReplayError):
    """The project already runs as many replays as it may at once (docs/operations.md, "Limits")."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"This project already has {limit} replay{'s' if limit != 1 else ''} queued or running, "
            "the most it may have at once. Wait for one to finish, or cancel one, and start again."
        )


# Replays are bulk work on a shared worker pool: one project starting many
# 10,000-event replays would hold every bulk worker and starve the others.
# A job still unfinished this long after it was created is taken as lost (its
# worker died past the time limits) and no longer counts against the limit.
REPLAY_STALE_AFTER = timedelta(hours=1)
# pg_advisory_xact_lock(namespace, project id): the first key keeps these
# locks apart from the audit chain's (services/audit.py).
_REPLAY_LOCK_NAMESPACE = 5_550_101


def _check_replay_capacity(project_id: int) -> None:
    # Two racing starts must not both see room for one more: the advisory lock
    # (held until the transaction ends) makes the count and the insert of each
    # project's starts happen one after the other.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_REPLAY_LOCK_NAMESPACE, project_id])
    limit: int = settings.MAX_CONCURRENT_REPLAYS_PER_PROJECT
    active = Job.objects.filter(
        project_id=project_id,
        kind=rules.JOB_KIND,
        status__in=[JobStatus.QUEUED, JobStatus.RUNNING],
        created_at__gte=timezone.now() - REPLAY_STALE_AFTER,
    ).count()
    if active >= limit:
        raise TooManyReplays(limit)


@transaction.atomic
def start_replay(agent: Agent, events: int, *, user: Any = None) -> Job:
    """A queued job that replays the agent's last ``events`` retrievals under the current draft.

    The draft is copied into the job: editing it later does not change what
    this replay reports.
    """
    if isinstance(events, bool) or not isinstance(events, int) or not 1 <= events <= MAX_EVENTS:
        raise InvalidEventCount()
    agent = Agent.objects.select_related("project", "active_policy").get(pk=agent.pk)
    draft = PolicyDraft.objects.filter(agent=agent).first()
    if draft is None:
        raise DraftRequired()
    assert agent.active_policy is not None, "every agent has an active policy version"
    _check_replay_capacity(agent.project_id)
    job = Job.objects.create(
        kind=rules.JOB_KIND,
        project=agent.project,
        agent=agent,
        created_by=user if getattr(user, "pk", None) else None,
        params={"events": events, "draft": draft.settings, "active_version": agent.active_policy.version},
    )
    audit.record(
        agent.project,
        "policy.replay_started",
        job,
        data={"agent": agent.slug, "events": events, "active_version": agent.active_policy.version},
        actor_user=user,
    )
    # After commit: a worker must find the job row when the task arrives.
    transaction.on_commit(partial(_enqueue, job.pk))
    return job


def _enqueue(job_id: UUID) -> None:
    # governance.tasks imports this module; importing it here avoids the cycle.
    from governance.tasks import run_replay

    run_replay.delay(str(job_id))


@transaction.atomic
def request_cancel(job: Job, *, user: Any = None) -> Job:
    """Stop a replay: a queued one at once, a running one at its next progress write."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.is_finished:
        return job
    if job.status == JobStatus.QUEUED:
        job.status = JobStatus.CANCELLED
        job.finished_at = timezone.now()
    job.cancel_requested = True
    job.save(update_fields=["status", "finished_at", "cancel_requested"])
    audit.record(job.project, "policy.replay_cancelled", job, data={"status": job.status}, actor_user=user)
    return job


def run(job_id: str | UUID) -> bool:
    """Run a replay job to the end (or until cancelled); False when there was nothing to do.

    Outside any transaction on purpose: each progress write commits at once,
    so people polling the job see it move.
    """
    job = Job.objects.filter(pk=job_id, kind=rules.JOB_KIND).select_related("agent").first()
    if job is None or job.is_finished or job.agent is None:
        return False
    # Claimed only if nobody cancelled it meanwhile; a redelivered task (worker
    # lost, acks_late) finds it running and starts it over.
    claimed = Job.objects.filter(
        pk=job.pk, status__in=[JobStatus.QUEUED, JobStatus.RUNNING], cancel_requested=False
    ).update(status=JobStatus.RUNNING, started_at=timezone.now(), progress_done=0, progress_total=0, error="")
    if not claimed:
        # Cancelled before this delivery started: make sure it does not stay "running".
        Job.objects.filter(
            pk=job.pk, status__in=[JobStatus.QUEUED, JobStatus.RUNNING], cancel_requested=True
        ).update(status=JobStatus.CANCELLED, finished_at=timezone.now())
        return False
    try:
        # Its reads are of past events and facts' histories: a replica a few
        # seconds behind gives the same answer, and the primary is spared the
        # scan (memoryadmin.routers). Its progress writes go to the primary.
        with routers.reading_from_replica():
            result, cancelled = _replay(job)
    except (OperationalError, InterfaceError):
        raise  # the database went away: the task retries with backoff
    except Exception as exc:
        logger.exception("replay job %s failed", job.pk)
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        return False
    _finish(job.pk, JobStatus.CANCELLED if cancelled else JobStatus.SUCCEEDED, result)
    return True


def _finish(job_id: UUID, status: str, result: dict[str, Any] | None) -> None:
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now()}
    if result is not None:
        fields["result"] = result
        fields["progress_done"] = result["events"]
    Job.objects.filter(pk=job_id).update(**fields)


@dataclass
class _Progress:
    job_id: UUID
    done: int = 0
    written: int = 0
    written_at: float = field(default_factory=time.monotonic)

    def step(self) -> bool:
        """Count one event; True when a person asked to cancel."""
        self.done += 1
        if (
            self.done - self.written < PROGRESS_EVERY
            and time.monotonic() - self.written_at < PROGRESS_SECONDS
        ):
            return False
        Job.objects.filter(pk=self.job_id).update(progress_done=self.done)
        self.written, self.written_at = self.done, time.monotonic()
        # A cancel asked for a moment ago is on the primary only.
        with routers.reading_from_primary():
            return bool(Job.objects.filter(pk=self.job_id).values_list("cancel_requested", flat=True).first())


def _replay(job: Job) -> tuple[dict[str, Any], bool]:
    assert job.agent is not None, "run() only replays jobs of an agent"
    draft = PolicySettings.from_dict(job.params["draft"])
    count = int(job.params["events"])
    window = list(
        RetrievalEvent.objects.filter(agent=job.agent)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)[:count]
    )
    # Oldest first: a session's first round is replayed before the rounds that reuse its block (R12).
    window.reverse()
    Job.objects.filter(pk=job.pk).update(progress_total=len(window))

    origins = _origins(window)
    replayer = _Replayer(draft, origins)
    # First rounds older than the window still shape the window's later rounds.
    earlier = sorted({origin for origin in origins.values() if origin is not None} - set(window))
    for chunk in _chunks(earlier):
        for _ in replayer.run(chunk):
            pass

    tally = rules.ReplayTally()
    progress = _Progress(job.pk)
    for chunk in _chunks(window):
        for comparison, info in replayer.run(chunk):
            tally.add(comparison, info)
            if progress.step():
                return {**tally.result(), "cancelled": True, "requested_events": count}, True
    return {**tally.result(), "cancelled": False, "requested_events": count}, False


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), CHUNK_SIZE):
        yield ids[start : start + CHUNK_SIZE]


def _origins(window: Sequence[int]) -> dict[int, int | None]:
    """For each event that reused a session-start block, the event that computed that block.

    It is the session's latest earlier event that did not reuse one: that is
    when ``retrieve`` stored the block the later round returned (R12).
    """
    cached = list(
        RetrievalEvent.objects.filter(pk__in=window, static_block_cached=True).values_list(
            "id", "session_id", "created_at"
        )
    )
    if not cached:
        return {}
    sessions = {session_id for _, session_id, _ in cached if session_id is not None}
    starts: dict[int, list[tuple[datetime, int]]] = defaultdict(list)
    rows = (
        RetrievalEvent.objects.filter(session_id__in=sessions, static_block_cached=False)
        .order_by("session_id", "created_at", "id")
        .values_list("session_id", "created_at", "id")
    )
    for session_id, created_at, event_id in rows:
        starts[session_id].append((created_at, event_id))
    origins: dict[int, int | None] = {}
    for event_id, session_id, created_at in cached:
        keys = starts.get(session_id, []) if session_id is not None else []
        index = bisect_left(keys, (created_at, event_id))
        origins[event_id] = keys[index - 1][1] if index else None
    return origins


@dataclass(frozen=True)
class _Recorded:
    """One candidate as its event recorded it."""

    fact_id: int
    decision: str
    reason: str | None
    relevance: float
    per_round: bool

    @property
    def outcome(self) -> rules.Outcome:
        return rules.Outcome(self.fact_id, self.decision, self.reason)


@dataclass(frozen=True)
class _StaticResult:
    """A session-start block, as recorded and as the draft would have made it (R12).

    Later rounds re-inject it: ``before`` and ``after`` are its static
    decisions on each side, and ``block`` and ``fact_ids`` what the draft
    would have cached.
    """

    block: str
    fact_ids: tuple[int, ...]
    before: tuple[rules.Outcome, ...]
    after: tuple[rules.Outcome, ...]
    kinds: dict[int, str]


class _Replayer:
    def __init__(self, draft: PolicySettings, origins: dict[int, int | None]) -> None:
        self.draft = draft
        self.origins = origins
        self.needed = {origin for origin in origins.values() if origin is not None}
        self.static: dict[int, _StaticResult] = {}
        # Reviewers' rulings on possible conflicts, per (project, principal). As they stand
        # now, not as they stood at each event: a pair ruled on since then replays ruled.
        self.rulings: dict[tuple[int, int | None], contradictions.PairRulings] = {}

    def run(self, chunk: Sequence[int]) -> Iterator[tuple[rules.EventComparison, dict[str, Any]]]:
        """Replay one chunk of events, oldest first, yielding each comparison as it is made."""
        events = sorted(
            RetrievalEvent.objects.filter(pk__in=chunk)
            .select_related("principal")
            .only(*_EVENT_FIELDS, "candidate_data", "principal__external_id"),
            key=lambda e: (e.created_at, e.pk),
        )
        if not events:
            return
        recorded = {event.pk: _recorded(event) for event in events}
        fact_ids = {row.fact_id for rows in recorded.values() for row in rows}
        for event in events:
            origin = self.origins.get(event.pk)
            if origin in self.static:
                fact_ids.update(self.static[origin].fact_ids)
        history, untracked = _history(fact_ids, until=events[-1].created_at)
        for event in events:
            yield self._event(event, recorded.get(event.pk, []), history, untracked)

    def _event(
        self,
        event: RetrievalEvent,
        recorded: list[_Recorded],
        history: dict[int, list[rules.FactSnapshot]],
        untracked: set[int],
    ) -> tuple[rules.EventComparison, dict[str, Any]]:
        at = event.created_at
        draft = self.draft
        owner = (event.project_id, event.principal_id)
        if owner not in self.rulings:
            self.rulings[owner] = conflicts.rulings_for(event.project_id, event.principal_id)
        rulings = self.rulings[owner]
        if event.static_block_cached:
            # A reused block's own items are recorded as selected on the round that
            # reused it; the replay takes them from the round that computed it.
            recorded = [row for row in recorded if row.per_round]
        candidates, kinds, extra, approximate = _candidates_at(event, recorded, history, untracked)

        inherited: _StaticResult | None = None
        # A later round that reused its block (R12) is decided against that block,
        # with its per-round candidates only; otherwise everything is decided again.
        block: str | None = None
        static_facts: list[retrieval.Candidate] = []
        hint: rendering.ResumeHint | None = None
        if event.static_block_cached:
            inherited = self.static.get(self.origins.get(event.pk) or 0)
            if inherited is None:
                # No first round to replay (it predates the data): keep the recorded block.
                block = rules.static_block_of(event.context)
                approximate = True
            else:
                block = inherited.block
                kinds = {**inherited.kinds, **kinds}
                snapshots = (rules.snapshot_at(history.get(fid, ()), at) for fid in inherited.fact_ids)
                static_facts = [rules.to_candidate(s, None) for s in snapshots if s is not None]
            extra.extend(
                rules.Outcome(c.fact_id, "excluded", rules.NOT_PER_ROUND)
                for c in candidates
                if not retrieval.is_per_round(c.kind, draft)
            )
            candidates = [c for c in candidates if retrieval.is_per_round(c.kind, draft)]
        else:
            # Nothing was injected, so the resume hint cannot be read back (R9, R10).
            approximate = approximate or (event.mode == "resume" and not event.context)
            hint = rules.resume_hint_of(event.context) if event.mode == "resume" else None
        plan = retrieval.plan_retrieval(
            candidates,
            draft,
            now=at,
            mode=event.mode,
            identity_verified=event.identity_verified,
            resume_hint=hint,
            cached_static_block=block,
            cached_static_facts=static_facts,
            rulings=rulings,
        )
        # A first round another round reused: what the draft would have cached for it.
        if not event.static_block_cached and event.pk in self.needed:
            self.static[event.pk] = _StaticResult(
                block=plan.static_block,
                fact_ids=tuple(item.fact_id for item in plan.selected if not item.per_round),
                before=tuple(row.outcome for row in recorded if not row.per_round),
                after=tuple(
                    rules.Outcome(d.fact_id, d.decision, d.reason) for d in plan.decisions if not d.per_round
                ),
                kinds=dict(kinds),
            )

        after = [rules.Outcome(d.fact_id, d.decision, d.reason) for d in plan.decisions] + extra
        comparison = rules.compare_event(
            event.pk,
            [row.outcome for row in recorded],
            after,
            kinds,
            tokens_before=event.tokens_used,
            tokens_after=plan.tokens_used,
            inherited_before=inherited.before if inherited else (),
            inherited_after=inherited.after if inherited else (),
            approximate=approximate,
        )
        info = {
            "created_at": at.isoformat(),
            "principal": event.principal.external_id if event.principal else None,
            "mode": event.mode,
            "round": event.round,
        }
        return comparison, info


def _recorded(event: RetrievalEvent) -> list[_Recorded]:
    return [
        _Recorded(c.fact_id, c.decision, c.reason, c.scores.get("relevance", 0.0), c.per_round)
        for c in event.candidates
    ]


def _candidates_at(
    event: RetrievalEvent,
    recorded: Sequence[_Recorded],
    history: dict[int, list[rules.FactSnapshot]],
    untracked: set[int],
) -> tuple[list[retrieval.Candidate], dict[int, str], list[rules.Outcome], bool]:
    """The event's candidates as their facts stood at its time: candidates, kinds, the ones not
    recorded yet (as outcomes), and whether any was approximate (erased or untracked)."""
    candidates: list[retrieval.Candidate] = []
    kinds: dict[int, str] = {}
    extra: list[rules.Outcome] = []
    approximate = False
    for row in recorded:
        snapshot = rules.snapshot_at(history.get(row.fact_id, ()), event.created_at)
        if snapshot is None:
            extra.append(rules.Outcome(row.fact_id, "excluded", rules.NOT_RECORDED))
            continue
        kinds[row.fact_id] = snapshot.fact.kind
        approximate = approximate or not snapshot.fact.statement or row.fact_id in untracked
        # Without a query no relevance was computed; the recorded 0.0 stands for "none".
        candidates.append(rules.to_candidate(snapshot, row.relevance if event.query else None))
    return candidates, kinds, extra, approximate


def _first_round(
    event: RetrievalEvent,
    candidates: Sequence[retrieval.Candidate],
    policy: PolicySettings,
    rulings: contradictions.PairRulings,
) -> retrieval.RetrievalPlan:
    """An event that computed its own session-start block, re-decided under ``policy``."""
    return retrieval.plan_retrieval(
        candidates,
        policy,
        now=event.created_at,
        mode=event.mode,
        identity_verified=event.identity_verified,
        resume_hint=rules.resume_hint_of(event.context) if event.mode == "resume" else None,
        cached_static_block=None,
        rulings=rulings,
    )


# --- One retrieval re-ranked under the published policy and the draft (policy editor) ---

PREVIEW_CHOICES = 6


def preview_events(agent: Agent) -> list[RetrievalEvent]:
    """The agent's latest retrievals a ranking preview can use: rounds that decided their own
    candidates (not reusing a session's cached block) among at least two, newest first."""
    return list(
        RetrievalEvent.objects.filter(agent=agent, static_block_cached=False, candidate_count__gte=2)
        .order_by("-created_at", "-id")
        .only("id", "created_at", "query", "candidate_count", "mode", "agent_id", "project_id")[
            :PREVIEW_CHOICES
        ]
    )


@dataclass(frozen=True)
class RankingPreview:
    event: RetrievalEvent
    rows: list[rules.RankedPair]
    published: retrieval.RetrievalPlan
    draft: retrieval.RetrievalPlan
    approximate: bool  # a statement erased since, or a fact from before history was kept

    @property
    def changed(self) -> int:
        return sum(1 for row in self.rows if row.changed)


def preview_ranking(
    agent: Agent, event_id: int, published: PolicySettings, draft: PolicySettings
) -> RankingPreview | None:
    """One of ``preview_events`` re-decided under both policies, with the facts as they stood then.

    The same pieces as a replay job (candidates rebuilt from history, reviewers' rulings,
    ``retrieval.plan_retrieval``): a preview of one event agrees with a replay of it. Read-only.
    """
    event = (
        RetrievalEvent.objects.filter(agent=agent, pk=event_id, static_block_cached=False)
        .only(*_EVENT_FIELDS, "candidate_data", "agent_id")
        .first()
    )
    if event is None:
        return None
    recorded = _recorded(event)
    history, untracked = _history((row.fact_id for row in recorded), until=event.created_at)
    candidates, _, _, approximate = _candidates_at(event, recorded, history, untracked)
    rulings = conflicts.rulings_for(event.project_id, event.principal_id)
    before = _first_round(event, candidates, published, rulings)
    after = _first_round(event, candidates, draft, rulings)
    return RankingPreview(event, rules.side_by_side(candidates, before, after), before, after, approximate)


def _history(
    fact_ids: Iterable[int], *, until: datetime
) -> tuple[dict[int, list[rules.FactSnapshot]], set[int]]:
    """Each fact's history rows up to ``until``, oldest first, as snapshots.

    Also returns the facts that had no history row at all: they predate
    history tracking, so their current row, stamped with when it was
    recorded, is the best there is, and events using them are approximate.
    """
    ids = sorted(set(fact_ids))
    event_model: Any = Fact.pgh_event_model  # type: ignore[attr-defined]  # added by pghistory.track at runtime
    rows = (
        event_model.objects.filter(pgh_obj_id__in=ids, pgh_created_at__lte=until)
        .order_by("pgh_obj_id", "pgh_created_at", "pgh_id")
        .values_list("pgh_obj_id", "pgh_created_at", *_SNAPSHOT_FIELDS)
    )
    history: dict[int, list[rules.FactSnapshot]] = defaultdict(list)
    for fact_id, at, *values in rows:
        history[fact_id].append(_snapshot(fact_id, at, values))
    missing = [fid for fid in ids if fid not in history]
    untracked: set[int] = set()
    if missing:
        # Only facts that never got a row: a fact whose rows all come after
        # ``until`` is simply not recorded yet, and must stay absent.
        tracked = set(
            event_model.objects.filter(pgh_obj_id__in=missing).values_list("pgh_obj_id", flat=True).distinct()
        )
        current = Fact.objects.filter(pk__in=[fid for fid in missing if fid not in tracked]).values_list(
            "id", "recorded_at", *_SNAPSHOT_FIELDS
        )
        for fact_id, recorded_at, *values in current:
            history[fact_id].append(_snapshot(fact_id, recorded_at, values))
            untracked.add(fact_id)
    return history, untracked


def _snapshot(fact_id: int, at: datetime, values: list[Any]) -> rules.FactSnapshot:
    data = dict(zip(_SNAPSHOT_FIELDS, values, strict=True))
    return rules.FactSnapshot(
        at=at, recorded_at=data["recorded_at"], fact=retrieval.candidate_from_columns(fact_id, data)
    )
