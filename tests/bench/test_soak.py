"""The short soak and each fault once, against a private stack: gunicorn, a Celery worker, beat,
Redis and PostgreSQL, all real processes (bench/soak/stack.py).

``make soak`` runs the long versions (50 agents for 5 minutes); these are the
versions ``make test`` can afford. One stack serves the module; every fault
leaves it whole again, so the tests do not depend on their order.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.soak import faults
from bench.soak.load import lost_writes, run_load, table, wait_all_embedded
from bench.soak.run import problems
from bench.soak.stack import Stack

pytestmark = [
    pytest.mark.soak,
    pytest.mark.skipif(
        not shutil.which("redis-server"), reason="needs redis-server (apt-get install redis-server)"
    ),
]

AGENTS = 8


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Not under pytest's tmp_path: as root, PostgreSQL runs as its own user,
    # which must be able to reach its data folder.
    stack = Stack(Path(tempfile.mkdtemp(prefix="memoryadmin-soak-")), agents=AGENTS)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
        stack.cleanup()


def test_short_soak_answers_no_server_error_and_loses_no_write(stack: Stack, tmp_path: Path) -> None:
    load = run_load(stack, tmp_path, agents=AGENTS, seconds=15)
    lost = lost_writes(stack, tmp_path)

    assert load["requests"] >= 30, table(load)
    assert load["server_errors"] == {}, table(load)
    assert lost["accepted"] > 10
    assert (lost["missing"], lost["wrong_key"], lost["duplicated"]) == ([], [], 0)
    assert wait_all_embedded(stack, timeout=120) >= 0
    for operation in ("POST /writes", "POST /retrieve"):
        figures = load["operations"][operation]
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"], table(load)
    assert problems({"soak": {"load": load, "lost": lost}}) == []


def test_worker_killed_mid_embedding_gets_the_task_again_and_embeds_once(stack: Stack) -> None:
    outcome = faults.worker_killed_mid_embedding(stack)

    assert outcome["embedded_when_killed"] is False, outcome
    assert outcome["redelivered_same_task"] is True, outcome
    assert outcome["stored_log_lines"] == 1, outcome
    assert outcome["embeddings_stored"] == 1, outcome


def test_writes_are_accepted_while_the_broker_is_down_and_embedded_after(
    stack: Stack, tmp_path: Path
) -> None:
    outcome = faults.broker_stopped(stack, tmp_path, agents=AGENTS, outage_seconds=5)

    assert outcome["writes_while_down"] >= 1
    assert outcome["statuses_while_down"] == {"201": outcome["writes_while_down"]}, outcome
    assert outcome["load"]["server_errors"] == {}, table(outcome["load"])
    assert outcome["lost"]["missing"] == [] and outcome["lost"]["duplicated"] == 0
    assert stack.unembedded_active_facts() == 0


def test_postgres_restart_answers_503_with_retry_after_then_recovers_by_itself(
    stack: Stack, tmp_path: Path
) -> None:
    outcome = faults.postgres_restarted(stack, tmp_path, agents=AGENTS, down_seconds=4)
    down: list[dict[str, Any]] = outcome["answers_while_down"]

    assert down, outcome
    assert {(a["status"], a["code"], a["has_message"], a["retry_after"]) for a in down} == {
        (503, "unavailable", True, "5")
    }, down
    # Agents under load saw 503s too, never another server error.
    assert set(outcome["load"]["server_errors"]) <= {"503"}, table(outcome["load"])
    assert outcome["recovered_seconds_after_start"] < 30
    assert all(outcome["processes_alive"].values()), outcome["processes_alive"]
    assert outcome["lost"]["missing"] == [] and outcome["lost"]["duplicated"] == 0


def test_retry_after_a_crash_between_commit_and_response_returns_the_stored_response(stack: Stack) -> None:
    outcome = faults.crash_after_commit(stack)

    assert outcome["answered_before_crash"] is False, outcome
    assert "status" not in outcome["first_attempt"], outcome
    assert outcome["retry_status"] == 201
    assert outcome["retry_returns_stored_response"] is True
    assert outcome["rows_for_key"] == 1
    assert outcome["other_body_same_key_status"] == 409
