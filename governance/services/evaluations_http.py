"""``memory_eval --url``: play scenarios through a running deployment's HTTP API (docs/quality.md).

The in-process harness (``services.evaluations``) makes projects of its own,
moves a scenario clock and acts as a reviewer. Over HTTP none of that is
possible with what the API offers an agent: one agent key acts in its own
project, on its agent's policy, at the real time. So this plays only the
scenarios whose every step the API can do, and reports the others as
*skipped*, with the reason, never as passed:

- writes, bulk writes, retrievals, feedback, withdrawals and session ends with
  the agent key;
- reviewer decisions with a person's access token (``--token``), else skipped;
- a scenario clock (``advance``), a policy change, the end of an agent's or
  project's scope, a second agent or project, or an agent set up with its own
  policy or source claims: skipped.

People and sessions are named with a run tag (``alice`` becomes
``alice-<tag>``), and so are keys, so runs do not meet each other's memory.
Project facts without a key are shared with whatever else the project holds:
point it at a project kept for evaluation. The figures are the same five
metrics as in-process, counted the same way, from what the API returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from governance.rules import evaluations as rules
from governance.services.evaluations import NEVER_IN_MEMORY, Report, ScenarioResult, load_scenario

HTTP_STEPS = (
    rules.WriteStep,
    rules.WriteManyStep,
    rules.RetrieveStep,
    rules.FeedbackStep,
    rules.WithdrawStep,
    rules.EndSessionStep,
)


REQUEST_TIMEOUT_SECONDS = 300


class RemoteError(RuntimeError):
    """The deployment answered something the harness cannot go on from."""


def skip_reason(scenario: rules.Scenario, *, has_token: bool) -> str | None:
    """Why this scenario cannot be played over HTTP, or None when it can."""
    if set(scenario.agents) != {rules.MAIN}:
        return "it needs a second agent or project; one agent key acts in one project"
    main = scenario.agents[rules.MAIN]
    if main.policy or main.config_source or main.sources is not None:
        return "it sets up its agent's own policy or sources; over HTTP the agent is what it is"
    for step in scenario.steps:
        if isinstance(step, rules.AdvanceStep):
            return "it moves the scenario clock, which the API cannot do"
        if isinstance(step, rules.PolicyStep):
            return "it changes the agent's policy, which would change a real agent"
        if isinstance(step, rules.EndScopeStep):
            return "it ends an agent's or project's scope, which would end a real one"
        if isinstance(step, rules.ReviewStep) and not has_token:
            return "it needs a reviewer's decision: give a person's access token"
    return None


@dataclass
class _Written:
    write_id: int | None
    fact_id: int | None
    derived_from: int | None = None  # the retrieval id it was derived from


@dataclass
class _Remote:
    scenario: rules.Scenario
    agent: httpx.Client
    person: httpx.Client | None
    tag: str
    facts: dict[str, _Written] = field(default_factory=dict)
    writes: list[_Written] = field(default_factory=list)
    retrievals: dict[str, int] = field(default_factory=dict)
    principals: dict[int, str | None] = field(default_factory=dict)
    injected: dict[int, list[int]] = field(default_factory=dict)
    tally: rules.Tally = field(default_factory=rules.Tally)
    notes: list[str] = field(default_factory=list)

    def name(self, value: str | None) -> str | None:
        return f"{value}-{self.tag}" if value else value

    def fact_id(self, name: str) -> int | None:
        written = self.facts[name]
        if written.write_id is not None and written.fact_id is None:
            # A reviewer's approval may have made the fact after the write.
            fact = _json(self.agent.get(f"/api/v1/writes/{written.write_id}"), 200).get("fact")
            written.fact_id = fact["id"] if fact else None
        return written.fact_id

    def check(self, ok: bool, failure: str) -> None:
        self.tally.checks += 1
        if not ok:
            self.tally.checks_failed += 1
            self.notes.append(failure)


def _json(response: httpx.Response, *expected: int) -> dict[str, Any]:
    if response.status_code not in expected:
        raise RemoteError(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}: {response.text[:300]}"
        )
    body: dict[str, Any] = response.json()
    return body


def _now() -> datetime:
    return datetime.now(UTC)


def _write(play: _Remote, step: rules.WriteStep) -> None:
    derived = play.retrievals[step.derived_from] if step.derived_from else None
    body: dict[str, Any] = {
        "principal": play.name(step.principal),
        "kind": step.kind,
        "key": play.name(step.key),
        "statement": step.statement,
        "source": {
            "type": step.source,
            "ref": step.ref,
            "observed_at": (_now() - timedelta(days=step.age_days)).isoformat(),
        },
    }
    if step.authority is not None:
        body["authority"] = step.authority
    if step.valid_for_days is not None:
        body["valid_to"] = (_now() + timedelta(days=step.valid_for_days)).isoformat()
    if step.session:
        body["session"] = play.name(step.session)
    if derived is not None:
        body["derived_from_retrieval"] = derived
    response = play.agent.post("/api/v1/writes", json=body)
    if response.status_code in (400, 403, 429):
        status, written = "refused", _Written(None, None)
        play.notes.append(f"Write {step.name or step.statement[:40]!r} was refused: {response.text[:200]}")
    else:
        data = _json(response, 201)
        status = data["status"]
        written = _Written(data["id"], data["fact"]["id"] if data.get("fact") else None, derived)
        play.writes.append(written)
    if step.name:
        play.facts[step.name] = written
    if step.expect_status:
        play.check(
            step.expect_status == status,
            f"Write {step.name or step.statement[:40]!r} ended {status}, expected {step.expect_status}.",
        )


def _write_many(play: _Remote, step: rules.WriteManyStep) -> None:
    for write in step.writes():
        _write(play, write)


def _review(play: _Remote, step: rules.ReviewStep) -> None:
    assert play.person is not None, "skip_reason keeps review steps out without a token"
    written = play.facts[step.write]
    if written.write_id is None:
        play.notes.append(f"Review of {step.write!r}: the write was refused, nothing to review.")
        return
    body: dict[str, Any] = {"action": step.action, "reason": step.reason}
    if step.statement is not None:
        body["statement"] = step.statement
    response = play.person.post(f"/api/v1/admin/reviews/{written.write_id}/decision", json=body)
    if response.status_code != 200:
        play.notes.append(f"Review of {step.write!r} was not applied: {response.text[:200]}")
    written.fact_id = None  # looked up again: an approval makes the fact


def _withdraw(play: _Remote, step: rules.WithdrawStep) -> None:
    fact_id = play.fact_id(step.fact)
    if fact_id is None:
        play.notes.append(f"Withdrawal of {step.fact!r}: it never became a fact.")
        return
    principal = _json(play.agent.get(f"/api/v1/facts/{fact_id}"), 200)["principal"]
    response = play.agent.post(
        f"/api/v1/facts/{fact_id}/withdraw", json={"reason": step.reason, "principal": principal}
    )
    if response.status_code != 200:
        play.notes.append(f"Withdrawal of {step.fact!r} was refused: {response.text[:200]}")


def _end_session(play: _Remote, step: rules.EndSessionStep) -> None:
    body: dict[str, Any] = {
        "principal": play.name(step.principal),
        "summary": step.summary,
        "resume_hint": step.resume_hint,
        "first_event": "e1",
        "last_event": "e99",
    }
    if step.source_text is not None:
        body["source_text"] = step.source_text
    data = _json(play.agent.post(f"/api/v1/sessions/{play.name(step.session)}/end", json=body), 200)
    summary = data.get("summary")
    written = _Written(
        summary["write_id"] if summary else None,
        summary["fact"]["id"] if summary and summary.get("fact") else None,
    )
    if summary:
        play.writes.append(written)
    if step.name:
        play.facts[step.name] = written
    status = summary["status"] if summary else "none"
    if step.expect_status:
        play.check(
            step.expect_status == status,
            f"Summary of session {step.session!r} ended {status}, expected {step.expect_status}.",
        )


def _retrieve(play: _Remote, step: rules.RetrieveStep) -> None:
    label = step.name or f"round {step.round} for {step.principal or 'the project'}"
    principal = play.name(step.principal)
    response = play.agent.post(
        "/api/v1/retrieve",
        json={
            "principal": principal,
            "session": play.name(step.session),
            "query": step.query,
            "round": step.round,
            "identity_verified": step.identity_verified,
        },
    )
    if response.status_code == 400:
        play.check(step.expect_refused, f"{label}: refused ({response.text[:200]}), expected a context.")
        return
    result = _json(response, 200)
    if step.expect_refused:
        play.check(False, f"{label}: gave a context, expected a refusal.")
    if step.max_tokens is not None:
        play.check(
            result["tokens_used"] <= step.max_tokens,
            f"{label}: used {result['tokens_used']} tokens, more than {step.max_tokens}.",
        )
    if step.expect_mode is not None:
        play.check(
            result["mode"] == step.expect_mode,
            f"{label}: session mode {result['mode']}, expected {step.expect_mode}.",
        )
    retrieval_id = result["retrieval_id"]
    if step.name:
        play.retrievals[step.name] = retrieval_id
    items = result["items"]
    play.injected[retrieval_id] = [item["fact_id"] for item in items]
    # Every candidate, read back with the same key: one the key cannot read is another project's.
    candidates = _json(play.agent.get(f"/api/v1/retrievals/{retrieval_id}"), 200)["candidates"]
    seen: dict[int, dict[str, Any] | None] = {}
    for candidate in candidates:
        answer = play.agent.get(f"/api/v1/facts/{candidate['fact_id']}")
        if answer.status_code not in (200, 404):
            raise RemoteError(f"GET /api/v1/facts/{candidate['fact_id']} answered {answer.status_code}")
        seen[candidate["fact_id"]] = answer.json() if answer.status_code == 200 else None

    def given(item: dict[str, Any]) -> rules.GivenItem:
        fact = seen.get(item["fact_id"])
        return rules.GivenItem(
            fact_id=item["fact_id"],
            statement=item["statement"],
            about_someone_else=fact is not None
            and fact["principal"] is not None
            and fact["principal"] != principal,
            inactive=fact is not None and fact["status"] != "active",
        )

    tally, notes = rules.retrieval_tally(
        step,
        label=label,
        named={name: play.fact_id(name) for name in step.named_facts},
        given=[given(item) for item in items],
        context=result["context"],
        candidates=[(fid, fact is None) for fid, fact in seen.items()],
        tokens=result["tokens_used"],
    )
    play.tally.add(tally)
    play.notes.extend(notes)


def _feedback(play: _Remote, step: rules.FeedbackStep) -> None:
    retrieval_id = play.retrievals[step.retrieval]
    given = set(play.injected.get(retrieval_id, []))
    used = [fid for fid in (play.fact_id(n) for n in step.used) if fid in given]
    wrong = [fid for fid in (play.fact_id(n) for n in step.wrong) if fid in given]
    response = play.agent.post(
        f"/api/v1/retrievals/{retrieval_id}/feedback", json={"used": used, "wrong": wrong}
    )
    if response.status_code != 201 and response.status_code != 200:
        play.notes.append(f"Feedback on {step.retrieval!r} was refused: {response.text[:200]}")
        return
    data = response.json()
    play.tally.used += len(data["used"])
    play.tally.stale_used += len(data["stale_used"])
    for fid in data["stale_used"]:
        play.notes.append(f"Feedback on {step.retrieval!r}: the agent used item {fid} after it changed.")


def _amplification(play: _Remote) -> None:
    parents: dict[int, list[int]] = {}
    for written in play.writes:
        fact = _json(play.agent.get(f"/api/v1/writes/{written.write_id}"), 200).get("fact")
        if not fact:
            continue
        status = _json(play.agent.get(f"/api/v1/facts/{fact['id']}"), 200)["status"]
        if status in NEVER_IN_MEMORY:
            continue
        play.tally.written_active += 1
        if written.derived_from is not None:
            play.tally.derived_active += 1
            parents[fact["id"]] = play.injected.get(written.derived_from, [])
            play.notes.append(f"Fact {fact['id']} copied from retrieved memory reached memory.")
    play.tally.longest_chain = max((rules.chain_length(parents, fid) for fid in parents), default=0)


STEPS: dict[type[Any], Any] = {
    rules.WriteStep: _write,
    rules.WriteManyStep: _write_many,
    rules.ReviewStep: _review,
    rules.WithdrawStep: _withdraw,
    rules.EndSessionStep: _end_session,
    rules.RetrieveStep: _retrieve,
    rules.FeedbackStep: _feedback,
}


def play_remote(
    scenario: rules.Scenario, agent: httpx.Client, person: httpx.Client | None, *, file: str = ""
) -> tuple[ScenarioResult, rules.Tally]:
    play = _Remote(scenario=scenario, agent=agent, person=person, tag=uuid.uuid4().hex[:8])
    error = ""
    try:
        for step in scenario.steps:
            STEPS[type(step)](play, step)
        _amplification(play)
    except (RemoteError, httpx.HTTPError, KeyError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    result = ScenarioResult.measured(
        scenario, play.tally, play.notes, file=file, error=error, counts=("retrievals", "candidates")
    )
    return result, play.tally


@dataclass(frozen=True)
class Skipped:
    name: str
    reason: str


@dataclass(frozen=True)
class RemoteReport:
    report: Report
    skipped: list[Skipped]


def evaluate_remote(
    paths: Sequence[Path],
    url: str,
    *,
    key: str,
    token: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> RemoteReport:
    """Play what can be played over HTTP against ``url``; the rest is listed as skipped.

    The overall figures pool only the scenarios played; it passes when each of them
    met its thresholds (a run that played nothing does not pass)."""

    def client(secret: str) -> httpx.Client:
        return httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {secret}"},
            # Generous: a deployment's first write may load its embedding model.
            timeout=REQUEST_TIMEOUT_SECONDS,
            transport=transport,
        )

    total = rules.Tally()
    results: list[ScenarioResult] = []
    skipped: list[Skipped] = []
    with client(key) as agent, client(token) if token else httpx.Client() as person:
        for path in paths:
            scenario = load_scenario(path)
            reason = skip_reason(scenario, has_token=token is not None)
            if reason:
                skipped.append(Skipped(scenario.name, reason))
                continue
            result, tally = play_remote(scenario, agent, person if token else None, file=path.name)
            results.append(result)
            total.add(tally)
    overall = rules.rates(total)
    passed = (
        bool(results)
        and all(r.passed for r in results)
        and not rules.missed(overall, rules.DEFAULT_THRESHOLDS)
    )
    report = Report(
        overall=overall,
        tokens_per_retrieval=rules.tokens_per_retrieval(total),
        scenarios=results,
        passed=passed,
    )
    return RemoteReport(report=report, skipped=skipped)
