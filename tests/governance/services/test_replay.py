"""services.replay: re-deciding recorded retrievals against the facts as they stood (issue 5).

History rows are stamped with their transaction's start, so these tests let
every API call commit on its own (``transaction=True``): in one wrapping test
transaction every row would look written before every retrieval.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Q
from django.utils import timezone

from governance.models import Fact, Job, RetrievalEvent
from governance.models.jobs import JobStatus
from governance.rules import replay as replay_rules
from governance.rules import retrieval
from governance.rules.policy import PolicySettings
from governance.rules.rendering import CONFIRM_LINE, PRINCIPAL_HEADING, PRIORITY, RESUME_LINE
from governance.rules.tokens import count_tokens
from governance.services import policies, replay
from tests.governance.policy_helpers import retrieve, write
from tests.helpers import wait_until
from tests.personas import AgentPersona, make_agent, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def run_replay(agent: AgentPersona, events: int, **draft: Any) -> Job:
    """Save ``draft`` (or a change retrieval ignores) and run a replay of the last ``events``, in-process."""
    editor = make_user(f"editor-{Job.objects.count()}", "policy_editor", agent.agent.project)
    policies.save_draft(agent.agent, draft or {"auto_approve_min_authority": 5}, user=editor)
    job = replay.start_replay(agent.agent, events, user=editor)  # runs eagerly once committed
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job


def result_of(job: Job) -> dict[str, Any]:
    assert job.result is not None, f"job {job.pk} has no result ({job.status})"
    return job.result


def changed(job: Job) -> dict[int, dict[str, Any]]:
    return {row["event_id"]: row for row in result_of(job)["changed"]}


def test_facts_are_replayed_as_they_stood_at_each_retrieval(project):
    bot = make_agent(project, "support-bot")
    old = write(bot, "Deploys to us-east-1", key="deployment_region", days_ago=2)
    before = retrieve(bot, session="s-1")
    new = write(bot, "Deploys to eu-west-2", key="deployment_region", days_ago=1)
    after = retrieve(bot, session="s-2")
    assert [i["fact_id"] for i in before["items"]] == [old["fact"]["id"]]
    assert [i["fact_id"] for i in after["items"]] == [new["fact"]["id"]]

    job = run_replay(bot, 10)

    # Today the old region is superseded; at the first retrieval it was the active fact, and stays selected.
    assert result_of(job)["events"] == 2
    assert result_of(job)["changed_events"] == 0
    assert result_of(job)["approximate_events"] == 0
    assert result_of(job)["tokens"]["before"] == result_of(job)["tokens"]["after"]


def test_replaying_an_unchanged_policy_reproduces_every_recorded_decision(project):
    bot = make_agent(project, "tight-bot", config_source=True, token_budget=150)
    other = make_agent(project, "other-bot")
    for days in (1, 3, 5, 9, 12, 18, 25, 40):
        write(bot, f"Preference verified {days} days ago, about the weekly report layout", days_ago=days)
    write(bot, "Deploys to us-east-1", key="deployment_region", days_ago=4)
    write(bot, "Deploys to eu-west-2", key="deployment_region", days_ago=2)
    write(bot, "Heard they like jazz", source="chat_message", expect="pending_review")
    write(bot, "Runs the Lisbon office", principal="bob", days_ago=30)
    write(bot, "The service runs on Python 3.13", principal=None, kind="project_fact", source="config")
    retrieve(bot, session="s-1")
    retrieve(bot, session="s-1", round=2)  # reuses the session-start block (R12)
    retrieve(bot, principal="bob", session="s-2")  # confirm mode: 30 days away (R9)
    retrieve(bot, session="s-3", identity_verified=False)  # no principal memory (R13)
    retrieve(bot, session=None)
    retrieve(other, session="s-9")  # another agent's traffic is not in this agent's window
    retrieve(bot, session="s-1", round=3)
    events = RetrievalEvent.objects.filter(agent=bot.agent)
    assert events.filter(reasons__contains=["over_budget"]).exists()  # the budget bites: not a vacuous test

    job = run_replay(bot, 100)

    result = result_of(job)
    assert result["events"] == events.count() == 6
    assert result["changed_events"] == 0, result["changed"]
    assert result["approximate_events"] == 0
    assert result["tokens"]["before"] == result["tokens"]["after"]
    assert result["tokens"]["before"]["total"] == sum(e.tokens_used for e in events)
    assert result["exclusions"]["before"] == result["exclusions"]["after"]
    assert {"over_budget", "superseded", "not_active", "stale", "identity_unverified"} <= set(
        result["exclusions"]["before"]
    )
    assert (job.progress_done, job.progress_total) == (6, 6)

    # The last event is a third round whose first round is outside a one-event window: that
    # first round is still replayed to know the block the draft would have cached.
    single = result_of(run_replay(bot, 1))
    assert (single["events"], single["changed_events"], single["approximate_events"]) == (1, 0, 0)


def test_lower_confirm_days_drops_confirm_tier_items_in_every_round_that_injects_them(project):
    bot = make_agent(project, "support-bot")
    recent = write(bot, "Uses a screen reader", days_ago=3)
    older = write(bot, "Prefers invoices by email", days_ago=20)
    first = retrieve(bot, session="s-1")
    second = retrieve(bot, session="s-1", round=2)
    assert {i["fact_id"] for i in first["items"]} == {recent["fact"]["id"], older["fact"]["id"]}

    job = run_replay(bot, 10, confirm_days=10)

    rows = changed(job)
    assert set(rows) == {first["retrieval_id"], second["retrieval_id"]}
    for row in rows.values():
        assert row["dropped"] == [{"fact_id": older["fact"]["id"], "kind": "preference", "reason": "stale"}]
        assert row["added"] == []
        assert row["tokens_after"] < row["tokens_before"]
    assert rows[first["retrieval_id"]]["tokens_before"] == first["tokens_used"]
    assert result_of(job)["dropped_by_reason"] == {"stale": 2}
    # The second round's own candidates were none: the stale exclusion is counted once, where it was decided.
    assert result_of(job)["exclusions"]["after"] == {"stale": 1}


def test_a_fact_withdrawn_since_is_replayed_without_its_text(project, support_bot):
    kept = write(support_bot, "Uses a screen reader", days_ago=3)
    gone = write(support_bot, "Lives at 12 Elm Street", days_ago=20)
    event = retrieve(support_bot, session="s-1")
    response = support_bot.client.post(
        f"/api/v1/facts/{gone['fact']['id']}/withdraw",
        {"reason": "User asked to forget", "principal": "alice"},
        format="json",
    )
    assert response.status_code == 200, response.content

    job = run_replay(support_bot, 10, confirm_days=10)

    [row] = result_of(job)["changed"]
    assert row["event_id"] == event["retrieval_id"]
    assert row["dropped"] == [{"fact_id": gone["fact"]["id"], "kind": "preference", "reason": "stale"}]
    assert row["approximate"] is True
    assert result_of(job)["approximate_events"] == 1
    # The job stores ids and reasons, never memory text: nothing for erasure to miss (R8).
    stored = json.dumps(result_of(job))
    assert "Elm Street" not in stored and "screen reader" not in stored
    assert kept["fact"]["id"] not in {item["fact_id"] for item in row["dropped"]}


def test_a_running_replay_stops_when_cancelled(project, support_bot, monkeypatch):
    write(support_bot, "Uses a screen reader", days_ago=3)
    for n in range(6):
        retrieve(support_bot, session=f"s-{n}")
    monkeypatch.setattr(replay, "PROGRESS_EVERY", 1)
    real_add = replay_rules.ReplayTally.add
    seen: list[int] = []

    def add_then_cancel(self, comparison, info=None):
        real_add(self, comparison, info)
        seen.append(comparison.event_id)
        if len(seen) == 2:  # a person presses Cancel while the replay runs
            Job.objects.update(cancel_requested=True)

    monkeypatch.setattr(replay_rules.ReplayTally, "add", add_then_cancel)
    editor = make_user("pat", "policy_editor", project)
    policies.save_draft(support_bot.agent, {"confirm_days": 10}, user=editor)

    job = replay.start_replay(support_bot.agent, 6, user=editor)

    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert result_of(job)["cancelled"] is True
    assert result_of(job)["events"] == 2 == job.progress_done
    assert job.progress_total == 6


def test_a_queued_replay_cancelled_before_it_starts_never_runs(project, support_bot, monkeypatch):
    monkeypatch.setattr(replay, "_enqueue", lambda job_id: None)  # the worker has not picked it up yet
    editor = make_user("pat", "policy_editor", project)
    policies.save_draft(support_bot.agent, {"confirm_days": 10}, user=editor)
    job = replay.start_replay(support_bot.agent, 5, user=editor)

    replay.request_cancel(job, user=editor)

    assert replay.run(job.pk) is False
    job.refresh_from_db()
    assert (job.status, job.result, job.started_at) == (JobStatus.CANCELLED, None, None)


def test_a_failing_replay_is_recorded_on_the_job(project, support_bot, monkeypatch):
    retrieve(support_bot, session="s-1")

    def broken(*args, **kwargs):
        raise ValueError("tokenizer exploded")

    monkeypatch.setattr(retrieval, "plan_retrieval", broken)
    editor = make_user("pat", "policy_editor", project)
    policies.save_draft(support_bot.agent, {"confirm_days": 10}, user=editor)
    job = replay.start_replay(support_bot.agent, 5, user=editor)

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "tokenizer exploded" in job.error
    assert job.finished_at is not None
    assert replay.run(job.pk) is False  # a redelivered task finds it done


def test_start_replay_needs_a_draft_and_a_sensible_count(project, support_bot):
    editor = make_user("pat", "policy_editor", project)
    with pytest.raises(replay.DraftRequired):
        replay.start_replay(support_bot.agent, 10, user=editor)
    policies.save_draft(support_bot.agent, {"confirm_days": 10}, user=editor)
    for events in (0, replay.MAX_EVENTS + 1):
        with pytest.raises(replay.InvalidEventCount):
            replay.start_replay(support_bot.agent, events, user=editor)
    assert not Job.objects.exists()


# --- With a real worker: the must-show -------------------------------


def copy_event(event: RetrievalEvent, count: int) -> list[int]:
    """``count`` stored copies of a recorded retrieval (with its candidates), newer than everything so far.

    Real retrievals through the API cost a request each; copies give a replay
    enough events to watch its progress move, and replay like the original.
    """
    start = timezone.now()
    copies = RetrievalEvent.objects.bulk_create(
        RetrievalEvent(
            project_id=event.project_id,
            agent_id=event.agent_id,
            principal_id=event.principal_id,
            policy_version_id=event.policy_version_id,
            round=event.round,
            query=event.query,
            mode=event.mode,
            identity_verified=event.identity_verified,
            context=event.context,
            tokens_used=event.tokens_used,
            token_budget=event.token_budget,
            candidate_count=event.candidate_count,
            excluded_count=event.excluded_count,
            reasons=event.reasons,
            candidate_data=event.candidate_data,
            candidate_fact_ids=event.candidate_fact_ids,
            selected_fact_ids=event.selected_fact_ids,
            created_at=start + timedelta(microseconds=n),
        )
        for n in range(count)
    )
    return [copy.pk for copy in copies]


def watch(job: Job, timeout: float = 180) -> list[tuple[str, int, int]]:
    """Poll the job row from this process until it finishes; every distinct (status, done, total) seen."""
    seen: list[tuple[str, int, int]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Job.objects.values_list("status", "progress_done", "progress_total").get(pk=job.pk)
        if not seen or seen[-1] != row:
            seen.append(row)
        if row[0] in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}:
            return seen
        time.sleep(0.005)
    raise AssertionError(f"the replay did not finish within {timeout} s; seen {seen[-5:]}")


def settle_background_work(timeout: float = 300) -> None:
    """Wait for the real worker to finish the writes' own tasks before a replay is timed.

    The worker embeds each new fact and reads a plain statement's meaning with the
    guard's model then (loading it on first use, slow on a busy machine); on the
    one-task-at-a-time test worker a replay queues behind that work.
    """
    wait_until(
        lambda: (
            not Fact.objects.filter(Q(embedded_at__isnull=True) | Q(meaning_check_pending=True))
            .exclude(statement="")
            .exists()
        ),
        timeout=timeout,
    )


@pytest.mark.worker
def test_real_worker_reports_exactly_the_events_whose_confirm_tier_items_drop(project, real_worker):
    bot = make_agent(project, "support-bot")
    write(bot, "Prefers dark mode", principal="alice", days_ago=2, ref="chat:alice-2")
    write(bot, "Uses a screen reader", principal="bob", days_ago=3, ref="chat:bob-3")
    bob_20 = write(bot, "Prefers invoices by email", principal="bob", days_ago=20, ref="chat:bob-20")
    write(
        bot, "Works from the Porto office", principal="carol", days_ago=9, ref="chat:carol-9"
    )  # confirm tier, kept
    dave_25 = write(bot, "Manages the billing team", principal="dave", days_ago=25, ref="chat:dave-25")
    write(
        bot, "Liked the old dashboard", principal="erin", days_ago=40, ref="chat:erin-40"
    )  # stale either way
    alice = retrieve(bot, principal="alice", session="s-alice")
    bob_1 = retrieve(bot, principal="bob", session="s-bob")
    bob_2 = retrieve(bot, principal="bob", session="s-bob", round=2)  # re-injects the cached block (R12)
    carol = retrieve(bot, principal="carol", session="s-carol")
    dave = retrieve(bot, principal="dave", session="s-dave")
    erin = retrieve(bot, principal="erin", session="s-erin")
    assert (bob_1["mode"], dave["mode"]) == ("resume", "confirm")
    assert [i["tier"] for i in carol["items"]] == ["confirm"]  # carol's item is confirm-tier too, but 9 <= 10
    # Enough unchanged traffic after them for the progress bar to have somewhere to go.
    fillers = copy_event(RetrievalEvent.objects.get(pk=alice["retrieval_id"]), 3000)
    total = 6 + len(fillers)
    settle_background_work()
    editor = make_user("pat", "policy_editor", project)
    policies.save_draft(bot.agent, {"confirm_days": 10}, user=editor)

    job = replay.start_replay(bot.agent, total, user=editor)  # enqueued on commit, to the worker process
    seen = watch(job)

    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    # Progress was observable from outside while the worker ran: part-way, and only ever forward.
    assert any(status == "running" and 0 < done < of == total for status, done, of in seen), seen
    done_values = [done for _, done, _ in seen]
    assert done_values == sorted(done_values)
    assert (job.progress_done, job.progress_total) == (total, total)

    result = result_of(job)
    rows = changed(job)
    assert set(rows) == {bob_1["retrieval_id"], bob_2["retrieval_id"], dave["retrieval_id"]}
    assert result["changed_events"] == 3 and result["events"] == total
    for event_id, fact in ((bob_1, bob_20), (bob_2, bob_20), (dave, dave_25)):
        row = rows[event_id["retrieval_id"]]
        assert row["dropped"] == [{"fact_id": fact["fact"]["id"], "kind": "preference", "reason": "stale"}]
        assert row["added"] == []
    assert result["dropped_by_reason"] == {"stale": 3}
    assert result["items_added"] == 0

    # Tokens before are what each retrieval recorded; after is the exact text the draft would render.
    bob_after = "\n".join(
        [
            PRIORITY,
            RESUME_LINE,
            PRINCIPAL_HEADING,
            "- Uses a screen reader [SOURCE: chat:bob-3 | AUTHORITY: 4 | AGE: 3 days]",
        ]
    )
    dave_after = "\n".join([PRIORITY, CONFIRM_LINE])
    for event, expected in ((bob_1, bob_after), (bob_2, bob_after), (dave, dave_after)):
        row = rows[event["retrieval_id"]]
        assert row["tokens_before"] == event["tokens_used"]
        assert row["tokens_after"] == count_tokens(expected, "o200k_base") < row["tokens_before"]
    saved = sum(row["tokens_before"] - row["tokens_after"] for row in rows.values())
    before_total = sum(RetrievalEvent.objects.filter(agent=bot.agent).values_list("tokens_used", flat=True))
    assert result["tokens"]["before"]["total"] == before_total
    assert result["tokens"]["after"]["total"] == before_total - saved
    assert result["tokens"]["after"]["max"] <= result["tokens"]["before"]["max"]
    assert (
        sum(result["tokens"]["histogram"]["before"]) == sum(result["tokens"]["histogram"]["after"]) == total
    )
    assert result["exclusions"]["before"]["stale"] + 2 == result["exclusions"]["after"]["stale"]
    assert erin["items"] == []


@pytest.mark.worker
def test_real_worker_replay_can_be_cancelled_while_it_runs(project, real_worker):
    bot = make_agent(project, "support-bot")
    write(bot, "Prefers dark mode", days_ago=2)
    event = retrieve(bot, session="s-1")
    copy_event(RetrievalEvent.objects.get(pk=event["retrieval_id"]), 6000)
    settle_background_work()
    editor = make_user("pat", "policy_editor", project)
    policies.save_draft(bot.agent, {"confirm_days": 10}, user=editor)
    job = replay.start_replay(bot.agent, 6001, user=editor)

    deadline = time.monotonic() + 180
    while not Job.objects.filter(pk=job.pk, progress_done__gt=0).exists():
        assert time.monotonic() < deadline, "the replay never started"
        time.sleep(0.005)
    replay.request_cancel(job, user=editor)
    watch(job)

    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert result_of(job)["cancelled"] is True
    assert 0 < result_of(job)["events"] < 6001


# --- one retrieval re-ranked for the policy editor (issue 16) ---------------------------------


def test_a_ranking_preview_under_the_published_policy_reproduces_the_recorded_retrieval(support_bot):
    write(support_bot, "Uses a screen reader", days_ago=1)
    write(support_bot, "Prefers invoices by email", days_ago=3)
    recorded = retrieve(support_bot, session="s-1")
    event = RetrievalEvent.objects.get(pk=recorded["retrieval_id"])
    published = support_bot.agent.active_policy.policy

    preview = replay.preview_ranking(support_bot.agent, event.pk, published, replace(published, max_items=1))

    assert preview is not None
    assert [item.fact_id for item in preview.published.selected] == event.selected_fact_ids
    assert preview.published.tokens_used == event.tokens_used
    assert [item.fact_id for item in preview.draft.selected] == event.selected_fact_ids[:1]
    assert preview.changed == 1


def test_only_this_agents_first_rounds_of_two_facts_or_more_are_offered(support_bot, project):
    write(support_bot, "Uses a screen reader", days_ago=1)
    first = retrieve(support_bot, session="s-1")["retrieval_id"]  # one fact: nothing to re-rank
    write(support_bot, "Prefers invoices by email", days_ago=3)
    two = retrieve(support_bot, session="s-2")["retrieval_id"]
    other = make_agent(project, "sales-bot")
    write(other, "Prefers calls", days_ago=1)
    write(other, "Lives in Leeds", days_ago=1)
    theirs = retrieve(other, session="x")["retrieval_id"]

    offered = [event.pk for event in replay.preview_events(support_bot.agent)]

    assert two in offered and first not in offered and theirs not in offered
    assert all(e.candidate_count >= 2 for e in replay.preview_events(support_bot.agent))
    assert replay.preview_ranking(support_bot.agent, theirs, PolicySettings(), PolicySettings()) is None
