"""Noisy neighbours (issue 19.8): queues, time limits, and a per-project limit on concurrent replays."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from governance import tasks
from governance.models import Job
from governance.models.jobs import JobStatus
from governance.services import policies as policy_service
from governance.services import replay as replay_service
from memoryadmin.celery import app
from tests.personas import AgentPersona, make_agent, token_client

pytestmark = pytest.mark.django_db

POLICY = "/api/v1/admin/projects/acme/agents/support-bot/policy"


# --- Routing and time limits ---------------------------------------------------


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("governance.tasks.embed_fact", "embeddings"),
        ("governance.tasks.embed_missing_facts", "bulk"),
        ("governance.tasks.expire_facts", "bulk"),
        ("governance.tasks.run_replay", "bulk"),
        ("governance.tasks.export_audit", "bulk"),
        ("governance.tasks.erase_statement", "bulk"),
    ],
)
def test_latency_sensitive_and_bulk_work_go_to_separate_queues(task, queue):
    route = app.amqp.router.route({}, task)
    assert route["queue"].name == queue


def test_the_worker_consumes_every_routed_queue():
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert routed | {settings.CELERY_TASK_DEFAULT_QUEUE} <= set(settings.WORKER_QUEUES)


@pytest.mark.parametrize(
    "task", [tasks.embed_fact, tasks.embed_missing_facts, tasks.expire_facts, tasks.run_replay]
)
def test_every_task_has_soft_and_hard_time_limits(task):
    soft = task.soft_time_limit or app.conf.task_soft_time_limit
    hard = task.time_limit or app.conf.task_time_limit
    assert soft and hard and soft < hard


def test_fair_scheduling_settings():
    # One reserved task per worker process, acknowledged only when done.
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_acks_late is True


# --- At most N replays per project at once -----------------------------------


@pytest.fixture
def with_draft(support_bot: AgentPersona, policy_editor: Any) -> AgentPersona:
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    return support_bot


def test_a_third_replay_in_a_project_is_429_json_until_one_finishes(with_draft, policy_editor, settings):
    settings.MAX_CONCURRENT_REPLAYS_PER_PROJECT = 2
    editor = token_client(policy_editor)

    first = editor.post(f"{POLICY}/replay", {"events": 10}, format="json")
    second = editor.post(f"{POLICY}/replay", {"events": 10}, format="json")
    third = editor.post(f"{POLICY}/replay", {"events": 10}, format="json")

    assert (first.status_code, second.status_code, third.status_code) == (202, 202, 429)
    error = third.json()["error"]
    assert error["code"] == "too_many_requests"
    assert error["message"].startswith("This project already has 2 replays queued or running")
    assert error["fields"] == {}
    assert Job.objects.count() == 2

    editor.post(f"/api/v1/admin/jobs/{first.json()['id']}/cancel", format="json")
    assert editor.post(f"{POLICY}/replay", {"events": 10}, format="json").status_code == 202


def test_the_limit_is_per_project(with_draft, policy_editor, project, other_project, settings):
    settings.MAX_CONCURRENT_REPLAYS_PER_PROJECT = 1
    replay_service.start_replay(with_draft.agent, 10, user=policy_editor)
    other = make_agent(other_project, "other-bot")
    policy_service.save_draft(other.agent, {"confirm_days": 10})

    assert replay_service.start_replay(other.agent, 10).project == other_project
    with pytest.raises(replay_service.TooManyReplays):
        replay_service.start_replay(with_draft.agent, 10, user=policy_editor)


def test_finished_and_long_lost_jobs_do_not_count(with_draft, policy_editor, settings):
    settings.MAX_CONCURRENT_REPLAYS_PER_PROJECT = 1
    done = replay_service.start_replay(with_draft.agent, 10, user=policy_editor)
    Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCEEDED, finished_at=timezone.now())
    lost = replay_service.start_replay(with_draft.agent, 10, user=policy_editor)
    Job.objects.filter(pk=lost.pk).update(
        status=JobStatus.RUNNING, created_at=timezone.now() - replay_service.REPLAY_STALE_AFTER - timedelta(1)
    )

    assert replay_service.start_replay(with_draft.agent, 10, user=policy_editor)


def test_the_console_says_so_in_plain_words(client, with_draft, policy_editor, settings):
    settings.MAX_CONCURRENT_REPLAYS_PER_PROJECT = 1
    client.force_login(policy_editor)
    url = reverse("policies:start_replay", args=["acme", "support-bot"])

    assert client.post(url, {"events": 10}).status_code == 302
    refused = client.post(url, {"events": 10})

    assert refused.status_code == 429
    html = refused.content.decode()
    assert "This project already has 1 replay queued or running" in html
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_racing_starts_cannot_both_take_the_last_place(project, policy_editor, settings, monkeypatch):
    settings.MAX_CONCURRENT_REPLAYS_PER_PROJECT = 1
    # The jobs stay queued: an (eager) run finishing between the two starts
    # would free the place and hide a missing lock.
    monkeypatch.setattr(replay_service, "_enqueue", lambda job_id: None)
    agent = make_agent(project, "race-bot")
    policy_service.save_draft(agent.agent, {"confirm_days": 10}, user=policy_editor)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def start() -> None:
        try:
            barrier.wait(timeout=10)
            replay_service.start_replay(agent.agent, 10, user=policy_editor)
            outcomes.append("started")
        except replay_service.TooManyReplays:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == ["refused", "started"]
    assert Job.objects.filter(agent=agent.agent).count() == 1
