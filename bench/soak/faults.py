"""The four faults, each done to a running stack and measured from outside, as an operator would see it.

Each function leaves the stack whole again (everything it stopped is started)
and returns what happened as plain data; the tests (tests/bench/) assert on
it and ``make soak`` reports it.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.soak.load import lost_writes, start_load, wait_all_embedded
from bench.soak.stack import Stack, wait_for

EMBED_RECEIVED = re.compile(r"Task governance\.tasks\.embed_fact\[([0-9a-f-]+)\] received")


def _post_write(stack: Stack, client: httpx.Client, statement: str, key: str | None = None) -> httpx.Response:
    return client.post(
        f"{stack.base_url}/api/v1/writes",
        json=stack.write_body(statement),
        headers={**stack.auth(0), "Idempotency-Key": key or str(uuid.uuid4())},
    )


def _stored_lines(stack: Stack, fact_id: int) -> int:
    return stack.worker_logs().count(f"Stored the embedding of fact {fact_id}.")


def _embeddings_stored(stack: Stack, fact_id: int) -> int:
    """How many different vectors the fact's row history shows being stored: one when embedded once."""
    [(count,)] = stack.sql(
        "SELECT count(DISTINCT embedded_at) FROM governance_factevent WHERE pgh_obj_id = %s",
        [fact_id],
    )
    return int(count)


def worker_killed_mid_embedding(stack: Stack) -> dict[str, Any]:
    """kill -9 the worker while it embeds a fact; the broker hands the task out again.

    A worker that has just started has not loaded the model yet, so its first
    embedding takes seconds: killed as soon as it logs that it has begun, it
    is certainly mid-embedding (checked: the fact has no vector when it dies).
    """
    # Nothing else owed a vector, so the new worker's first real embedding is this fact's.
    wait_for("every fact to be embedded", lambda: stack.owed_embeddings() == 0, 180, 0.5)
    stack.kill_worker()
    fresh = stack.start_worker()
    stack.wait_worker()
    # Two spaces: the write guard reads the statement with its spacing squeezed,
    # so its vector is not this statement's own and the worker must run the
    # model for it (a plain statement arrives with its vector and is only confirmed).
    with httpx.Client(timeout=60) as client:
        response = _post_write(stack, client, f"Likes the window  seat {uuid.uuid4().hex[:8]}.")
    response.raise_for_status()
    fact_id = response.json()["fact"]["id"]

    embedding = f"Embedding fact {fact_id}."
    wait_for("the worker to start embedding the fact", lambda: embedding in fresh.log_text(), 60, 0.02)
    killed = stack.kill_worker()
    log = killed.log_text()
    # One task at a time (concurrency 1, prefetch 1): the last one it took is the fact's.
    task_id = EMBED_RECEIVED.findall(log[: log.index(embedding)])[-1]
    [(embedded_when_killed,)] = stack.sql(
        "SELECT embedded_at IS NOT NULL FROM governance_fact WHERE id = %s", [fact_id]
    )

    started = time.monotonic()
    successor = stack.start_worker()
    stack.wait_worker()
    wait_for(
        "the fact to be embedded",
        lambda: stack.sql("SELECT embedded_at IS NOT NULL FROM governance_fact WHERE id = %s", [fact_id])[0][
            0
        ],
        120,
        0.5,
    )
    embedded_after = round(time.monotonic() - started, 1)
    redelivered = wait_for_text(successor.log, f"embed_fact[{task_id}] received", timeout=60)
    return {
        "fact": fact_id,
        "task": task_id,
        "embedded_when_killed": bool(embedded_when_killed),
        "redelivered_same_task": redelivered,
        "embedded_after_restart_seconds": embedded_after,
        "stored_log_lines": _stored_lines(stack, fact_id),
        "embeddings_stored": _embeddings_stored(stack, fact_id),
    }


def wait_for_text(log: Path, text: str, timeout: float) -> bool:
    try:
        wait_for(text, lambda: text in log.read_text(errors="replace"), timeout, 0.5)
    except RuntimeError:
        return False
    return True


def broker_stopped(stack: Stack, out: Path, *, agents: int = 8, outage_seconds: float = 6) -> dict[str, Any]:
    """Stop Redis under load; writes are still accepted; restarted empty, every fact is embedded after.

    The restarted broker keeps nothing (no persistence), so every task queued
    before the outage is lost too: the embedding sweep has all of it to do.
    """
    load = start_load(stack, out, agents=agents, seconds=int(outage_seconds) + 12)
    time.sleep(4)
    stack.stop_redis()
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    ends = time.monotonic() + outage_seconds
    with httpx.Client(timeout=60) as client:
        while time.monotonic() < ends:
            began = time.monotonic()
            response = _post_write(stack, client, f"Reads the newsletter on {uuid.uuid4().hex[:8]} days.")
            latencies.append(time.monotonic() - began)
            statuses[response.status_code] += 1
    stack.start_redis()
    restarted = time.monotonic()
    stats = load.finish()
    caught_up = wait_all_embedded(stack, timeout=180)
    return {
        "writes_while_down": sum(statuses.values()),
        "statuses_while_down": {str(code): count for code, count in statuses.items()},
        "slowest_write_while_down_ms": round(max(latencies) * 1000),
        "all_embedded_seconds_after_restart": round(time.monotonic() - restarted, 1),
        "waited_for_embedding_seconds": caught_up,
        "load": stats,
        "lost": lost_writes(stack, out),
    }


def postgres_restarted(
    stack: Stack, out: Path, *, agents: int = 8, down_seconds: float = 4
) -> dict[str, Any]:
    """Stop PostgreSQL (fast shutdown) under load, keep it down a few seconds, start it again."""
    load = start_load(stack, out, agents=agents, seconds=int(down_seconds) + 16)
    time.sleep(4)
    stack.stop_postgres()
    answers: list[dict[str, Any]] = []
    ends = time.monotonic() + down_seconds
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < ends:
            response = _post_write(stack, client, f"Prefers email on {uuid.uuid4().hex[:8]}.")
            body = (
                response.json()
                if response.headers.get("content-type", "").startswith("application/json")
                else None
            )
            answers.append(
                {
                    "status": response.status_code,
                    "code": (body or {}).get("error", {}).get("code"),
                    "has_message": bool((body or {}).get("error", {}).get("message")),
                    "retry_after": response.headers.get("Retry-After"),
                }
            )
            time.sleep(0.3)
        stack.start_postgres()

        def serves() -> bool:
            return _post_write(stack, client, f"Prefers calls on {uuid.uuid4().hex[:8]}.").status_code == 201

        recovered = wait_for("the API to accept writes again", serves, 60, 0.2)
    stats = load.finish()
    time.sleep(1)
    return {
        "answers_while_down": answers,
        "statuses_while_down": dict(Counter(str(a["status"]) for a in answers)),
        "recovered_seconds_after_start": round(recovered, 1),
        "processes_alive": {name: process.alive() for name, process in stack.processes.items()},
        "load": stats,
        "lost": lost_writes(stack, out),
        "all_embedded_seconds": wait_all_embedded(stack, timeout=180),
    }


def crash_after_commit(stack: Stack) -> dict[str, Any]:
    """The web process dies after the write committed and before it answered; the client retries.

    The web tier runs this fault with ``TASK_GATHER_MS=0``, so that a request
    hands its tasks to the broker itself after its commit; the broker is
    paused (it accepts connections and never answers), so the request, once
    committed, waits in that hand-off: a moment between commit and response
    that lasts long enough to kill the gunicorn workers in, every time. (By
    default a web process gathers its hand-offs and sends them from a thread
    of its own, which a paused broker does not hold the answer for, and the
    moment is too short to hit.) The web tier is started again as it was.
    """
    stack.restart_web(TASK_GATHER_MS="0")
    try:
        return _crash_after_commit(stack)
    finally:
        stack.restart_web()


def _crash_after_commit(stack: Stack) -> dict[str, Any]:
    key = str(uuid.uuid4())
    statement = f"Takes notes by hand {uuid.uuid4().hex[:8]}."
    first: dict[str, Any] = {}

    def send() -> None:
        try:
            with httpx.Client(timeout=60) as client:
                first["status"] = _post_write(stack, client, statement, key).status_code
        except httpx.HTTPError as exc:
            first["error"] = type(exc).__name__

    stack.pause_redis()
    try:
        sender = threading.Thread(target=send)
        sender.start()
        wait_for(
            "the write to commit",
            lambda: bool(stack.sql("SELECT 1 FROM governance_write WHERE idempotency_key = %s", [key])),
            30,
            0.05,
        )
        answered_before_crash = not sender.is_alive()
        killed = stack.kill_web_workers()
        sender.join(30)
    finally:
        stack.resume_redis()
    [(write_id, stored)] = stack.sql(
        "SELECT id, response FROM governance_write WHERE idempotency_key = %s", [key]
    )
    with httpx.Client(timeout=60) as client:
        wait_for("gunicorn's new workers", lambda: len(stack.web_worker_pids()) >= 2, 30)
        retry = wait_for_response(lambda: _post_write(stack, client, statement, key))
        other = client.post(
            f"{stack.base_url}/api/v1/writes",
            json=stack.write_body(statement + " (changed)"),
            headers={**stack.auth(0), "Idempotency-Key": key},
        )
    [(rows,)] = stack.sql("SELECT count(*) FROM governance_write WHERE idempotency_key = %s", [key])
    return {
        "write": write_id,
        "answered_before_crash": answered_before_crash,
        "killed_web_workers": len(killed),
        "first_attempt": first,
        "retry_status": retry.status_code,
        "retry_returns_stored_response": retry.json() == stored,
        "rows_for_key": int(rows),
        "other_body_same_key_status": other.status_code,
        "embedded_seconds": wait_all_embedded(stack, timeout=120),
    }


def wait_for_response(send: Any, timeout: float = 60) -> httpx.Response:
    """The first answer from a web process that is up again (connection errors while it starts)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            response: httpx.Response = send()
            return response
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
