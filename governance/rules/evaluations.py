"""Memory-quality scenarios and the five metrics, as pure functions (docs/quality.md).

A scenario is a timeline in YAML: writes, policy changes, reviewer decisions,
withdrawals, session ends, a clock that moves forward, retrievals that say
what must and must not be injected, and the agent's feedback. This module
turns the parsed YAML into typed steps (refusing anything it does not know,
so a typo cannot silently turn a check off) and turns the counts a run
gathered into rates. The service plays the steps against the real services.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

METRICS: tuple[str, ...] = (
    "recall",
    "contamination",
    "stale_adoption",
    "cross_project_leakage",
    "write_back_amplification",
)
# Recall is "at least"; every other metric is "at most".
AT_LEAST = frozenset({"recall"})
# The targets over the shipped scenarios (issue 14, "Must show"); a scenario
# may tighten or loosen its own in ``thresholds``.
DEFAULT_THRESHOLDS: Mapping[str, float] = {
    "recall": 0.95,
    "contamination": 0.0,
    "stale_adoption": 0.0,
    "cross_project_leakage": 0.0,
    "write_back_amplification": 0.05,
}
METRIC_LABELS: Mapping[str, str] = {
    "recall": "Needed facts given",
    "contamination": "Forbidden items given",
    "stale_adoption": "Outdated items given or used",
    "cross_project_leakage": "Other projects' items seen",
    "write_back_amplification": "Memory copied from memory",
}
MAIN = "main"
ACTIONS = ("approve", "reject")


class ScenarioError(ValueError):
    """The scenario file is not one the harness can play; the message names the place."""


@dataclass(frozen=True)
class AgentSpec:
    name: str
    project: str = MAIN
    policy: Mapping[str, Any] = field(default_factory=dict)
    config_source: bool = False
    sources: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WriteStep:
    statement: str
    name: str | None = None
    agent: str = MAIN
    principal: str | None = None
    kind: str = "profile"
    key: str | None = None
    source: str = "user_statement"
    ref: str = "chat:1"
    age_days: float = 0.0
    authority: int | None = None
    valid_for_days: float | None = None
    session: str | None = None
    derived_from: str | None = None
    expect_status: str | None = None


@dataclass(frozen=True)
class WriteManyStep:
    """``count`` writes from one template (``{n}`` is 1..count): memory under budget pressure."""

    count: int
    statement: str
    agent: str = MAIN
    principal: str | None = None
    kind: str = "project_fact"
    source: str = "documentation"
    ref: str = "docs:bulk-{n}"
    age_days: float = 0.0

    def writes(self) -> tuple[WriteStep, ...]:
        """The single writes this step stands for, in order (in-process and HTTP runners alike)."""
        return tuple(
            WriteStep(
                statement=self.statement.replace("{n}", str(n)),
                agent=self.agent,
                principal=self.principal,
                kind=self.kind,
                source=self.source,
                ref=self.ref.replace("{n}", str(n)),
                age_days=self.age_days,
            )
            for n in range(1, self.count + 1)
        )


@dataclass(frozen=True)
class PolicyStep:
    changes: Mapping[str, Any]
    agent: str = MAIN


@dataclass(frozen=True)
class ReviewStep:
    write: str
    action: str
    reason: str = "Scenario reviewer decision"
    statement: str | None = None


@dataclass(frozen=True)
class WithdrawStep:
    fact: str
    reason: str = "The person asked to forget this"
    agent: str = MAIN


@dataclass(frozen=True)
class AdvanceStep:
    days: float


@dataclass(frozen=True)
class EndSessionStep:
    session: str
    principal: str
    summary: str = ""
    resume_hint: str = ""
    source_text: str | None = None
    name: str | None = None
    agent: str = MAIN
    expect_status: str | None = None


@dataclass(frozen=True)
class EndScopeStep:
    # "agent" retires the agent; "project" archives the agent's project.
    scope: str
    agent: str = MAIN


@dataclass(frozen=True)
class RetrieveStep:
    name: str | None = None
    principal: str | None = None
    session: str | None = None
    query: str = ""
    round: int = 1
    identity_verified: bool = True
    agent: str = MAIN
    expect: tuple[str, ...] = ()
    expect_text: tuple[str, ...] = ()
    contaminants: tuple[str, ...] = ()
    forbid_text: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    stale_text: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()
    # Checks on the retrieval itself; a failed one fails the scenario.
    max_tokens: int | None = None
    expect_mode: str | None = None
    expect_refused: bool = False

    @property
    def named_facts(self) -> tuple[str, ...]:
        """The scenario's names of facts this step checks for (a runner resolves them to ids)."""
        return (*self.expect, *self.contaminants, *self.stale, *self.foreign)


@dataclass(frozen=True)
class FeedbackStep:
    retrieval: str
    used: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()
    agent: str = MAIN


Step = (
    WriteStep
    | WriteManyStep
    | PolicyStep
    | ReviewStep
    | WithdrawStep
    | AdvanceStep
    | EndSessionStep
    | EndScopeStep
    | RetrieveStep
    | FeedbackStep
)
STEP_TYPES: Mapping[str, type[Any]] = {
    "write": WriteStep,
    "write_many": WriteManyStep,
    "policy": PolicyStep,
    "review": ReviewStep,
    "withdraw": WithdrawStep,
    "advance": AdvanceStep,
    "end_session": EndSessionStep,
    "end_scope": EndScopeStep,
    "retrieve": RetrieveStep,
    "feedback": FeedbackStep,
}


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    agents: Mapping[str, AgentSpec]
    steps: tuple[Step, ...]
    thresholds: Mapping[str, float]

    @property
    def span_days(self) -> float:
        """How far the clock moves, plus the oldest backdated observation: the
        harness starts the clock this far before the real time, so no moment of
        the scenario lies in the real future."""
        advance = sum(step.days for step in self.steps if isinstance(step, AdvanceStep))
        backdated = max(
            (step.age_days for step in self.steps if isinstance(step, WriteStep | WriteManyStep)), default=0.0
        )
        return advance + backdated


def _tuple(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ScenarioError(f"{where}: expected a name or a list of names.")


def _build(kind: str, body: Any, where: str) -> Step:
    cls = STEP_TYPES[kind]
    if kind == "advance" and isinstance(body, int | float):
        body = {"days": body}
    if kind == "policy" and isinstance(body, Mapping) and "changes" not in body:
        changes = {k: v for k, v in body.items() if k != "agent"}
        body = {"changes": changes, **({"agent": body["agent"]} if "agent" in body else {})}
    if not isinstance(body, Mapping):
        raise ScenarioError(f"{where}: a '{kind}' step takes a mapping of fields.")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise ScenarioError(
            f"{where}: '{kind}' has no field {', '.join(unknown)}; it takes {', '.join(known)}."
        )
    values: dict[str, Any] = {}
    for name, spec in known.items():
        if name not in body:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise ScenarioError(f"{where}: '{kind}' needs '{name}'.")
            continue
        value = body[name]
        if isinstance(spec.default, tuple):
            value = _tuple(value, f"{where}.{name}")
        values[name] = value
    try:
        step: Step = cls(**values)
    except TypeError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc
    _check_step(step, where)
    return step


def _check_step(step: Step, where: str) -> None:
    if isinstance(step, AdvanceStep) and (not isinstance(step.days, int | float) or step.days <= 0):
        raise ScenarioError(f"{where}: the clock only moves forward by a positive number of days.")
    if isinstance(step, ReviewStep) and step.action not in ACTIONS:
        raise ScenarioError(f"{where}: a review is 'approve' or 'reject'.")
    if isinstance(step, WriteManyStep) and (
        not isinstance(step.count, int) or not 1 <= step.count <= 2000 or "{n}" not in step.statement
    ):
        raise ScenarioError(f"{where}: write_many takes a count from 1 to 2000 and a statement with {{n}}.")
    if isinstance(step, WriteStep | WriteManyStep) and (
        not isinstance(step.age_days, int | float) or step.age_days < 0
    ):
        raise ScenarioError(f"{where}: age_days is a number of days, zero or more.")
    if isinstance(step, EndScopeStep) and step.scope not in ("agent", "project"):
        raise ScenarioError(f"{where}: end_scope's scope is 'agent' or 'project'.")
    if isinstance(step, RetrieveStep) and (not isinstance(step.round, int) or step.round < 1):
        raise ScenarioError(f"{where}: round is a whole number from 1.")


def parse_scenario(data: Any, *, default_name: str) -> Scenario:
    """The typed scenario, or ScenarioError naming the first problem."""
    if not isinstance(data, Mapping):
        raise ScenarioError("A scenario is a mapping with 'steps'.")
    unknown = sorted(set(data) - {"name", "description", "agents", "steps", "thresholds"})
    if unknown:
        raise ScenarioError(f"Unknown top-level field {', '.join(unknown)}.")
    name = str(data.get("name") or default_name)
    agents: dict[str, AgentSpec] = {MAIN: AgentSpec(MAIN)}
    for agent_name, spec in (data.get("agents") or {}).items():
        if not isinstance(spec, Mapping):
            raise ScenarioError(f"agents.{agent_name}: a mapping of project, policy, config_source, sources.")
        extra = sorted(set(spec) - {"project", "policy", "config_source", "sources"})
        if extra:
            raise ScenarioError(f"agents.{agent_name}: unknown field {', '.join(extra)}.")
        sources = spec.get("sources")
        agents[str(agent_name)] = AgentSpec(
            name=str(agent_name),
            project=str(spec.get("project", MAIN)),
            policy=dict(spec.get("policy") or {}),
            config_source=bool(spec.get("config_source", False)),
            sources=tuple(_tuple(sources, f"agents.{agent_name}.sources")) if sources is not None else None,
        )
    thresholds = dict(DEFAULT_THRESHOLDS)
    for metric, value in (data.get("thresholds") or {}).items():
        if metric not in METRICS:
            raise ScenarioError(
                f"thresholds: unknown metric '{metric}'; the metrics are {', '.join(METRICS)}."
            )
        if not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ScenarioError(f"thresholds.{metric}: a rate between 0 and 1.")
        thresholds[metric] = float(value)
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError("'steps' is a non-empty list.")
    steps: list[Step] = []
    for index, raw in enumerate(raw_steps, start=1):
        where = f"step {index}"
        if not isinstance(raw, Mapping) or len(raw) != 1:
            raise ScenarioError(f"{where}: each step is one of {', '.join(STEP_TYPES)} with its fields.")
        ((kind, body),) = raw.items()
        if kind not in STEP_TYPES:
            raise ScenarioError(f"{where}: unknown step '{kind}'; steps are {', '.join(STEP_TYPES)}.")
        step = _build(kind, body, where)
        agent = getattr(step, "agent", MAIN)
        if agent not in agents:
            raise ScenarioError(f"{where}: no agent '{agent}' in 'agents'.")
        steps.append(step)
    _check_names(steps)
    return Scenario(
        name=name,
        description=str(data.get("description") or ""),
        agents=agents,
        steps=tuple(steps),
        thresholds=thresholds,
    )


def _check_names(steps: Sequence[Step]) -> None:
    """Every name a step refers to was given by an earlier step: a misspelt
    name would otherwise make a check vacuous."""
    facts: set[str] = set()
    retrievals: set[str] = set()
    for index, step in enumerate(steps, start=1):
        where = f"step {index}"
        refs: tuple[str, ...] = ()
        if isinstance(step, WriteStep):
            if step.derived_from is not None and step.derived_from not in retrievals:
                raise ScenarioError(
                    f"{where}: derived_from names no earlier retrieval '{step.derived_from}'."
                )
        elif isinstance(step, ReviewStep):
            refs = (step.write,)
        elif isinstance(step, WithdrawStep):
            refs = (step.fact,)
        elif isinstance(step, RetrieveStep):
            refs = step.named_facts
        elif isinstance(step, FeedbackStep):
            if step.retrieval not in retrievals:
                raise ScenarioError(f"{where}: feedback names no earlier retrieval '{step.retrieval}'.")
            refs = (*step.used, *step.wrong)
        missing = [ref for ref in refs if ref not in facts]
        if missing:
            raise ScenarioError(f"{where}: no earlier write named {', '.join(missing)}.")
        if isinstance(step, WriteStep | EndSessionStep) and step.name:
            facts.add(step.name)
        if isinstance(step, RetrieveStep) and step.name:
            retrievals.add(step.name)


# The counts a scenario's result reports, in this order (``Tally.tokens`` is reported per retrieval).
REPORTED_COUNTS: tuple[str, ...] = (
    "retrievals",
    "expected",
    "expected_found",
    "injected",
    "contaminated",
    "stale_injected",
    "used",
    "stale_used",
    "candidates",
    "leaked",
    "written_active",
    "derived_active",
    "checks",
    "checks_failed",
)


@dataclass
class Tally:
    """Counts gathered while a scenario plays; the rates are ratios of these (docs/quality.md)."""

    expected: int = 0
    expected_found: int = 0
    injected: int = 0
    contaminated: int = 0
    stale_injected: int = 0
    used: int = 0
    stale_used: int = 0
    candidates: int = 0
    leaked: int = 0
    written_active: int = 0
    derived_active: int = 0
    longest_chain: int = 0
    retrievals: int = 0
    tokens: int = 0
    # Failed checks on outcomes (a write's status, a retrieval's mode or size, a refusal).
    checks: int = 0
    checks_failed: int = 0

    def add(self, other: Tally) -> None:
        for name in (*REPORTED_COUNTS, "tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.longest_chain = max(self.longest_chain, other.longest_chain)


@dataclass(frozen=True)
class GivenItem:
    """One item a retrieval injected, as a runner read it back after the retrieval was logged."""

    fact_id: int
    statement: str
    about_someone_else: bool  # a fact about another person than the one asked about
    inactive: bool  # no longer active once the retrieval was logged


def retrieval_tally(
    step: RetrieveStep,
    *,
    label: str,
    named: Mapping[str, int | None],
    given: Sequence[GivenItem],
    context: str,
    candidates: Sequence[tuple[int, bool]],
    tokens: int,
) -> tuple[Tally, list[str]]:
    """What one retrieval adds to the counts, and the notes on what it got wrong
    (in-process and HTTP runners alike).

    ``named`` gives the fact id of each of ``step.named_facts`` (None: it never
    became a fact); ``given`` the injected items in order; ``candidates`` each
    candidate's fact id and whether it is another project's.
    """
    tally = Tally(retrievals=1, tokens=tokens)
    notes: list[str] = []
    selected = {item.fact_id for item in given}

    def ids(names: Sequence[str]) -> set[int]:
        return {fid for fid in (named[n] for n in names) if fid is not None}

    for name in step.expect:
        tally.expected += 1
        if named[name] in selected:
            tally.expected_found += 1
        else:
            notes.append(f"{label}: did not give {name!r}.")
    for phrase in step.expect_text:
        tally.expected += 1
        if _contains(context, phrase):
            tally.expected_found += 1
        else:
            notes.append(f"{label}: the context lacks {phrase!r}.")

    contaminants, stale, foreign = ids(step.contaminants), ids(step.stale), ids(step.foreign)
    tally.injected += len(given)
    for item in given:
        statement = item.statement
        forbidden = any(_contains(statement, p) for p in step.forbid_text)
        if item.fact_id in contaminants or item.about_someone_else or forbidden:
            tally.contaminated += 1
            notes.append(f"{label}: gave forbidden item {statement[:60]!r}.")
        # R2 checked from the outside: an item not active once the retrieval is
        # logged was given after it changed.
        outdated = any(_contains(statement, p) for p in step.stale_text)
        if item.fact_id in stale or item.inactive or outdated:
            tally.stale_injected += 1
            notes.append(f"{label}: gave outdated item {statement[:60]!r}.")
    # Phrases that reach the context outside any item (a resume hint, say) count as one item each.
    outside = context
    for item in given:
        outside = outside.replace(item.statement, "")
    for phrase in step.forbid_text:
        if _contains(outside, phrase):
            tally.injected += 1
            tally.contaminated += 1
            notes.append(f"{label}: the context says forbidden {phrase!r}.")
    for phrase in step.stale_text:
        if _contains(outside, phrase):
            tally.injected += 1
            tally.stale_injected += 1
            notes.append(f"{label}: the context says outdated {phrase!r}.")

    tally.candidates += len(candidates)
    for fact_id, other_project in candidates:
        if other_project or fact_id in foreign:
            tally.leaked += 1
            notes.append(f"{label}: another project's item was a candidate.")
    return tally, notes


def _contains(text: str, phrase: str) -> bool:
    return phrase.casefold() in text.casefold()


def _ratio(part: int, whole: int, *, empty: float) -> float:
    return round(part / whole, 4) if whole else empty


def rates(tally: Tally) -> dict[str, float]:
    """The five metrics, each between 0 and 1 (docs/quality.md has the definitions)."""
    return {
        # Nothing was needed, so nothing was missed.
        "recall": _ratio(tally.expected_found, tally.expected, empty=1.0),
        "contamination": _ratio(tally.contaminated, tally.injected, empty=0.0),
        "stale_adoption": _ratio(
            tally.stale_injected + tally.stale_used, tally.injected + tally.used, empty=0.0
        ),
        "cross_project_leakage": _ratio(tally.leaked, tally.candidates, empty=0.0),
        "write_back_amplification": _ratio(tally.derived_active, tally.written_active, empty=0.0),
    }


def tokens_per_retrieval(tally: Tally) -> float:
    return round(tally.tokens / tally.retrievals, 1) if tally.retrievals else 0.0


def missed(metrics: Mapping[str, float], thresholds: Mapping[str, float]) -> list[str]:
    """The metrics that miss their threshold, in METRICS order."""
    out = []
    for metric in METRICS:
        limit = thresholds[metric]
        value = metrics[metric]
        if (value < limit) if metric in AT_LEAST else (value > limit):
            out.append(metric)
    return out


def chain_length(
    parents: Mapping[int, Sequence[int]], fact_id: int, _seen: frozenset[int] = frozenset()
) -> int:
    """How many derivations stand behind a fact: 0 for memory from outside, 1 for a
    copy of retrieved memory, 2 for a copy of a copy (a summary of summaries).
    ``parents`` maps a derived fact to the facts injected into the retrieval it
    was derived from."""
    if fact_id in _seen or fact_id not in parents:
        return 0
    seen = _seen | {fact_id}
    return 1 + max((chain_length(parents, parent, seen) for parent in parents[fact_id]), default=0)
