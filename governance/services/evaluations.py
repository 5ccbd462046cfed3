"""Memory-quality runs: play scenarios against the real services and measure them (docs/quality.md).

Each scenario plays in projects made for it alone (``eval-<run>-<n>-<name>``),
through the same service functions the agent API calls, with the scenario's
own clock passed explicitly as ``now``. The five metrics are computed from
what the retrievals actually returned and the events they logged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from governance.models import Agent, EvaluationRun, EvaluationStatus, Fact, Project, RetrievalEvent, Write
from governance.rules import evaluations as rules
from governance.rules.policy import PolicySettings
from governance.selectors import retrievals as retrieval_selectors
from governance.services import agents as agent_service
from governance.services import conflicts as conflict_service
from governance.services import embeddings as embedding_service
from governance.services import facts as fact_service
from governance.services import memberships, policies, reviews
from governance.services import retrievals as retrieval_service
from governance.services import sessions as session_service
from governance.services import writes as write_service

logger = logging.getLogger(__name__)

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
EVAL_USERNAME = "memory-eval"
# Writes the product refuses outright (400/403/429 in the API) end here.
REFUSED = "refused"
# A fact that reached memory at some point: everything but the statuses a
# write ends in when it never did.
NEVER_IN_MEMORY = ("pending_review", "quarantined", "rejected")


def shipped_scenarios() -> list[Path]:
    """Every scenario that ships with the product, in name order (``memory_eval`` with no files)."""
    return sorted(SCENARIO_DIR.glob("*.yaml"))


def load_scenario(path: Path) -> rules.Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise rules.ScenarioError(f"{path.name}: cannot be read as YAML ({exc}).") from exc
    try:
        return rules.parse_scenario(data, default_name=path.stem)
    except rules.ScenarioError as exc:
        raise rules.ScenarioError(f"{path.name}: {exc}") from exc


@dataclass
class ScenarioResult:
    name: str
    file: str
    metrics: dict[str, float]
    thresholds: dict[str, float]
    tokens_per_retrieval: float
    passed: bool
    missed: list[str]
    notes: list[str]
    longest_chain: int
    counts: dict[str, int]
    error: str = ""

    @classmethod
    def measured(
        cls,
        scenario: rules.Scenario,
        tally: rules.Tally,
        notes: list[str],
        *,
        file: str,
        error: str,
        counts: Sequence[str] = rules.REPORTED_COUNTS,
    ) -> ScenarioResult:
        """A played scenario's result: its rates against its thresholds, and ``counts`` of its tally."""
        metrics = rules.rates(tally)
        missed = rules.missed(metrics, scenario.thresholds)
        if tally.checks_failed:
            missed.append("checks")
        return cls(
            name=scenario.name,
            file=file,
            metrics=metrics,
            thresholds=dict(scenario.thresholds),
            tokens_per_retrieval=rules.tokens_per_retrieval(tally),
            passed=not missed and not error,
            missed=missed,
            notes=notes,
            longest_chain=tally.longest_chain,
            counts={name: getattr(tally, name) for name in counts},
            error=error,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            **self.metrics,
            "tokens_per_retrieval": self.tokens_per_retrieval,
            "passed": self.passed,
            "missed": self.missed,
            "notes": self.notes,
            "thresholds": self.thresholds,
            "longest_chain": self.longest_chain,
            "counts": self.counts,
            "error": self.error,
        }


@dataclass
class _Named:
    write_id: int | None
    fact_id: int | None
    statement: str


@dataclass
class _Play:
    """The state of one scenario while it plays."""

    scenario: rules.Scenario
    tag: str
    now: datetime
    reviewer: Any
    projects: dict[str, Project] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    facts: dict[str, _Named] = field(default_factory=dict)
    retrievals: dict[str, RetrievalEvent] = field(default_factory=dict)
    injected: dict[int, list[int]] = field(default_factory=dict)
    tally: rules.Tally = field(default_factory=rules.Tally)
    notes: list[str] = field(default_factory=list)

    def fact_id(self, name: str) -> int | None:
        named = self.facts[name]
        if named.write_id is not None:
            # A reviewer's approval may have made the fact after the write.
            current = Write.objects.filter(pk=named.write_id).values_list("fact_id", flat=True).first()
            if current is not None:
                named.fact_id = current
        return named.fact_id


def _reviewer() -> Any:
    user, _ = get_user_model().objects.get_or_create(
        username=EVAL_USERNAME, defaults={"email": "", "is_active": False}
    )
    return user


def _set_up(play: _Play) -> None:
    for spec in play.scenario.agents.values():
        if spec.project not in play.projects:
            slug = f"eval-{play.tag}-{len(play.projects)}"[:64]
            project = agent_service.ensure_project(
                slug, name=f"Evaluation {play.scenario.name} ({spec.project})"
            )
            memberships.grant_role(project, play.reviewer, "admin", reason="Memory-quality scenario reviewer")
            play.projects[spec.project] = project
        project = play.projects[spec.project]
        policy = PolicySettings.from_dict({**PolicySettings().to_dict(), **dict(spec.policy)})
        agent = agent_service.ensure_agent(project, spec.name, policy=policy)
        if spec.config_source or spec.sources is not None:
            agent = agent_service.set_source_claims(
                agent,
                allowed=list(spec.sources) if spec.sources is not None else None,
                is_config_source=spec.config_source,
                reason="Memory-quality scenario set-up",
            )
        play.agents[spec.name] = agent


def _embed(fact_id: int | None) -> None:
    # Per-round kinds are found by similarity, so a fact must be embedded before
    # the next step retrieves; the on-commit task may run much later or elsewhere.
    # The background similarity check follows the embedding, as the task does.
    if fact_id is not None and embedding_service.embed_fact(fact_id):
        conflict_service.check_similar_facts(fact_id)


def _write(play: _Play, step: rules.WriteStep) -> None:
    agent = play.agents[step.agent]
    derived = play.retrievals[step.derived_from].pk if step.derived_from else None
    request = write_service.WriteRequest(
        principal=step.principal,
        kind=step.kind,
        key=step.key,
        statement=step.statement,
        source_type=step.source,
        source_ref=step.ref,
        source_observed_at=play.now - timedelta(days=step.age_days),
        authority=step.authority,
        valid_to=play.now + timedelta(days=step.valid_for_days) if step.valid_for_days is not None else None,
        session=step.session,
        derived_from_retrieval=derived,
    )
    try:
        write = write_service.submit_write(agent, request, now=play.now)
    except (
        write_service.SourceNotAllowed,
        write_service.UnknownReference,
        write_service.ReviewQueueFull,
    ) as exc:
        status, write_id, fact_id = REFUSED, None, None
        play.notes.append(f"Write {step.name or step.statement[:40]!r} was refused: {exc}")
    else:
        status, write_id, fact_id = write.status, write.pk, write.fact_id
        _embed(fact_id)
    if step.name:
        play.facts[step.name] = _Named(write_id=write_id, fact_id=fact_id, statement=step.statement)
    if step.expect_status:
        _check(
            play,
            step.expect_status == status,
            f"Write {step.name or step.statement[:40]!r} ended {status}, expected {step.expect_status}.",
        )


def _check(play: _Play, ok: bool, failure: str) -> None:
    play.tally.checks += 1
    if not ok:
        play.tally.checks_failed += 1
        play.notes.append(failure)


def _write_many(play: _Play, step: rules.WriteManyStep) -> None:
    for write in step.writes():
        _write(play, write)


def _policy(play: _Play, step: rules.PolicyStep) -> None:
    agent = play.agents[step.agent]
    policies.save_draft(agent, dict(step.changes), user=play.reviewer)
    policies.publish_draft(agent, "Memory-quality scenario policy change", user=play.reviewer)
    agent.refresh_from_db()


def _review(play: _Play, step: rules.ReviewStep) -> None:
    named = play.facts[step.write]
    if named.write_id is None:
        play.notes.append(f"Review of {step.write!r}: the write was refused, nothing to review.")
        return
    try:
        reviews.decide(
            named.write_id,
            reviews.Decision(action=step.action, reason=step.reason, statement=step.statement),
            reviewer=play.reviewer,
        )
    except (reviews.AlreadyDecided, reviews.Tombstoned, reviews.InvalidDecision) as exc:
        play.notes.append(f"Review of {step.write!r} was not applied: {exc}")
    _embed(play.fact_id(step.write))


def _withdraw(play: _Play, step: rules.WithdrawStep) -> None:
    fact_id = play.fact_id(step.fact)
    if fact_id is None:
        play.notes.append(f"Withdrawal of {step.fact!r}: it never became a fact.")
        return
    try:
        fact_service.withdraw_on_request(
            play.agents[step.agent], Fact.objects.get(pk=fact_id), reason=step.reason
        )
    except (fact_service.WithdrawalRefused, fact_service.FactStateError) as exc:
        play.notes.append(f"Withdrawal of {step.fact!r} was refused: {exc}")


def _end_session(play: _Play, step: rules.EndSessionStep) -> None:
    request = session_service.EndRequest(
        principal=step.principal,
        summary=step.summary,
        resume_hint=step.resume_hint,
        first_event="e1",
        last_event="e99",
        source_text=step.source_text,
    )
    result = session_service.end_session(play.agents[step.agent], step.session, request, now=play.now)
    write = result.write
    _embed(write.fact_id if write else None)
    if step.name:
        play.facts[step.name] = _Named(
            write_id=write.pk if write else None,
            fact_id=write.fact_id if write else None,
            statement=step.summary,
        )
    status = write.status if write else "none"
    if step.expect_status:
        _check(
            play,
            step.expect_status == status,
            f"Summary of session {step.session!r} ended {status}, expected {step.expect_status}.",
        )


def _end_scope(play: _Play, step: rules.EndScopeStep) -> None:
    agent = play.agents[step.agent]
    if step.scope == "agent":
        agent_service.retire_agent(agent, reason="Memory-quality scenario: the agent's scope ended")
    else:
        agent_service.archive_project(agent.project, reason="Memory-quality scenario: the project ended")
    agent.refresh_from_db()


def _retrieve(play: _Play, step: rules.RetrieveStep) -> None:
    agent = play.agents[step.agent]
    label = step.name or f"round {step.round} for {step.principal or 'the project'}"
    request = retrieval_service.RetrieveRequest(
        principal=step.principal,
        session=step.session,
        query=step.query,
        round=step.round,
        identity_verified=step.identity_verified,
    )
    try:
        event, result = retrieval_service.retrieve(agent, request, now=play.now)
    except session_service.SessionError as exc:
        # The API answers 400 and nothing is injected.
        _check(play, step.expect_refused, f"{label}: refused ({exc}), expected a context.")
        return
    if step.expect_refused:
        _check(play, False, f"{label}: gave a context, expected a refusal.")
    if step.max_tokens is not None:
        _check(
            play,
            event.tokens_used <= step.max_tokens,
            f"{label}: used {event.tokens_used} tokens, more than {step.max_tokens}.",
        )
    if step.expect_mode is not None:
        _check(
            play,
            event.mode == step.expect_mode,
            f"{label}: session mode {event.mode}, expected {step.expect_mode}.",
        )
    if step.name:
        play.retrievals[step.name] = event
    selected = [item.fact_id for item in result.selected]
    play.injected[event.pk] = selected
    candidates = retrieval_selectors.candidate_facts(event)
    by_id = {c.fact_id: c for c in candidates}

    def given(fact_id: int) -> rules.GivenItem:
        candidate = by_id.get(fact_id)
        return rules.GivenItem(
            fact_id=fact_id,
            statement=candidate.statement if candidate is not None else "",
            about_someone_else=candidate is not None
            and candidate.principal_id is not None
            and candidate.principal_id != event.principal_id,
            inactive=candidate is not None and candidate.status != "active",
        )

    tally, notes = rules.retrieval_tally(
        step,
        label=label,
        named={name: play.fact_id(name) for name in step.named_facts},
        given=[given(fid) for fid in selected],
        context=event.context,
        candidates=[(c.fact_id, c.project_id != event.project_id) for c in candidates],
        tokens=event.tokens_used,
    )
    play.tally.add(tally)
    play.notes.extend(notes)


def _feedback(play: _Play, step: rules.FeedbackStep) -> None:
    event = play.retrievals[step.retrieval]
    used = [fid for fid in (play.fact_id(n) for n in step.used) if fid is not None]
    wrong = [fid for fid in (play.fact_id(n) for n in step.wrong) if fid is not None]
    given = set(play.injected.get(event.pk, []))
    # The agent can only report using what it was given; a named item that was
    # not given was already counted as a recall miss.
    try:
        feedback = retrieval_service.record_feedback(
            play.agents[step.agent],
            event,
            used=[fid for fid in used if fid in given],
            wrong=[fid for fid in wrong if fid in given],
        )
    except retrieval_service.FeedbackError as exc:
        play.notes.append(f"Feedback on {step.retrieval!r} was refused: {exc}")
        return
    play.tally.used += len(feedback.used)
    play.tally.stale_used += len(feedback.stale_used)
    for fid in feedback.stale_used:
        play.notes.append(f"Feedback on {step.retrieval!r}: the agent used item {fid} after it changed.")


def _amplification(play: _Play) -> None:
    """Derived memory that reached memory, against all memory the scenario made (R16)."""
    facts = list(
        Fact.objects.filter(project__in=play.projects.values())
        .exclude(status__in=NEVER_IN_MEMORY)
        .values_list("pk", "derived_from_retrieval_id")
    )
    play.tally.written_active += len(facts)
    parents: dict[int, list[int]] = {}
    for fact_id, retrieval_id in facts:
        if retrieval_id is not None:
            play.tally.derived_active += 1
            parents[fact_id] = play.injected.get(retrieval_id, [])
            play.notes.append(f"Fact {fact_id} copied from retrieved memory reached memory.")
    play.tally.longest_chain = max((rules.chain_length(parents, fid) for fid in parents), default=0)


STEPS: dict[type[Any], Callable[[_Play, Any], None]] = {
    rules.WriteStep: _write,
    rules.WriteManyStep: _write_many,
    rules.PolicyStep: _policy,
    rules.ReviewStep: _review,
    rules.WithdrawStep: _withdraw,
    rules.EndSessionStep: _end_session,
    rules.EndScopeStep: _end_scope,
    rules.RetrieveStep: _retrieve,
    rules.FeedbackStep: _feedback,
}


def play_scenario(
    scenario: rules.Scenario, *, file: str = "", tag: str | None = None
) -> tuple[ScenarioResult, rules.Tally]:
    """Play one scenario in projects of its own and measure it."""
    # The clock starts far enough back that its last moment is the real present.
    start = timezone.now() - timedelta(days=scenario.span_days + 1)
    play = _Play(
        scenario=scenario,
        tag=tag or uuid.uuid4().hex[:10],
        now=start,
        reviewer=_reviewer(),
    )
    error = ""
    try:
        _set_up(play)
        for step in scenario.steps:
            if isinstance(step, rules.AdvanceStep):
                play.now += timedelta(days=step.days)
                # What the beat's expiry sweep would have done by then.
                fact_service.expire_due_facts(play.now)
            else:
                STEPS[type(step)](play, step)
        _amplification(play)
    except Exception as exc:
        # One broken scenario is reported as failed; the run goes on with the rest.
        logger.exception("Scenario %s failed to play", scenario.name)
        error = f"{type(exc).__name__}: {exc}"
    return ScenarioResult.measured(scenario, play.tally, play.notes, file=file, error=error), play.tally


@dataclass(frozen=True)
class Report:
    overall: dict[str, float]
    tokens_per_retrieval: float
    scenarios: list[ScenarioResult]
    passed: bool


def evaluate(paths: Sequence[Path], *, progress: Callable[[int, int], None] | None = None) -> Report:
    """Play every scenario file; overall rates pool the counts of all of them (docs/quality.md)."""
    total = rules.Tally()
    results: list[ScenarioResult] = []
    for done, path in enumerate(paths):
        if progress:
            progress(done, len(paths))
        try:
            scenario = load_scenario(path)
        except rules.ScenarioError as exc:
            results.append(
                ScenarioResult(
                    name=path.stem,
                    file=path.name,
                    metrics=rules.rates(rules.Tally()),
                    thresholds=dict(rules.DEFAULT_THRESHOLDS),
                    tokens_per_retrieval=0.0,
                    passed=False,
                    missed=[],
                    notes=[],
                    longest_chain=0,
                    counts={},
                    error=str(exc),
                )
            )
            continue
        result, tally = play_scenario(scenario, file=path.name)
        results.append(result)
        total.add(tally)
    if progress:
        progress(len(paths), len(paths))
    overall = rules.rates(total)
    passed = all(r.passed for r in results) and not rules.missed(overall, rules.DEFAULT_THRESHOLDS)
    return Report(
        overall=overall,
        tokens_per_retrieval=rules.tokens_per_retrieval(total),
        scenarios=results,
        passed=passed,
    )


def resolve(names: Sequence[str]) -> list[Path]:
    """Scenario files from what a person typed: a path, or a shipped scenario's name."""
    paths = []
    for name in names:
        path = Path(name)
        if not path.exists() and (SCENARIO_DIR / f"{name}.yaml").exists():
            path = SCENARIO_DIR / f"{name}.yaml"
        if not path.is_file():
            raise rules.ScenarioError(f"No scenario file {name!r}.")
        paths.append(path)
    return paths


@transaction.atomic
def create_run(paths: Sequence[Path], *, origin: str, user: Any = None) -> EvaluationRun:
    return EvaluationRun.objects.create(
        origin=origin,
        started_by=user if getattr(user, "pk", None) else None,
        scenario_files=[str(p) for p in paths],
        progress_total=len(paths),
    )


def start_run(paths: Sequence[Path], *, user: Any) -> EvaluationRun:
    """A run from the console: queued for a worker once the row is committed."""
    from governance.tasks import run_evaluation

    with transaction.atomic():
        run = create_run(paths, origin="console", user=user)
        transaction.on_commit(lambda: run_evaluation.delay(run.pk))
    return run


def execute_run(run_id: int) -> Report | None:
    """Play a stored run's scenarios, writing progress and then the results on the run;
    None if the run is gone or already started (a redelivered task)."""
    run = EvaluationRun.objects.filter(pk=run_id, status=EvaluationStatus.QUEUED).first()
    if run is None:
        return None
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationStatus.RUNNING)

    def progress(done: int, total: int) -> None:
        EvaluationRun.objects.filter(pk=run.pk).update(progress_done=done, progress_total=total)

    try:
        report = evaluate([Path(p) for p in run.scenario_files], progress=progress)
    except Exception as exc:
        logger.exception("Evaluation run %s failed", run.pk)
        EvaluationRun.objects.filter(pk=run.pk).update(
            status=EvaluationStatus.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        raise
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=EvaluationStatus.SUCCEEDED,
        passed=report.passed,
        overall={**report.overall, "tokens_per_retrieval": report.tokens_per_retrieval},
        scenarios=[r.to_dict() for r in report.scenarios],
        finished_at=timezone.now(),
    )
    return report
