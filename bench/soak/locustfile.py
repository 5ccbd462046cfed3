"""Agents for the soak run: each Locust user is one agent with its own key.

An agent does what the agent API is for, in a mix: proposes writes about the
people it serves (some that supersede what it said before, some from weaker
sources that wait for review), retrieves their context at session start and
on later rounds, reads what it remembers about a person, and reads back its
own writes. A write is sent with an Idempotency-Key and, after a 503 or a
lost connection, sent again with the same key after the Retry-After the
server gave, as a careful client does; every write the server accepted (201)
is recorded with its key so the run can check afterwards that none was lost.

Run by bench.soak (``make soak``); the settings come from the environment:
``SOAK_KEYS`` (JSON file of agent keys), ``SOAK_OUT`` (folder for
``writes.jsonl`` and ``stats.json``), ``SOAK_WAIT_MIN``/``SOAK_WAIT_MAX``
(seconds an agent thinks between calls).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from locust import HttpUser, between, events, task
from locust.env import Environment

KEYS: list[str] = json.loads(Path(os.environ["SOAK_KEYS"]).read_text())
OUT = Path(os.environ["SOAK_OUT"])
OUT.mkdir(parents=True, exist_ok=True)
WRITE_RETRIES = 6

_key_numbers = itertools.count()
_lock = threading.Lock()
_accepted = open(OUT / "writes.jsonl", "a", buffering=1)  # noqa: SIM115 (closed at quitting)
STATUSES: defaultdict[str, Counter[str]] = defaultdict(Counter)

REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-2"]
LANGUAGES = ["Python", "Go", "Rust", "TypeScript", "Kotlin", "Elixir"]
TOPICS = ["billing", "deployments", "onboarding", "incident review", "data retention", "the roadmap"]


@events.request.add_listener
def _count_status(name: str, response: Any, exception: Exception | None, **kwargs: Any) -> None:
    code = getattr(response, "status_code", 0) or 0
    with _lock:
        STATUSES[name][str(code) if code else "connection error"] += 1


class Agent(HttpUser):
    wait_time = between(
        float(os.environ.get("SOAK_WAIT_MIN", "1")), float(os.environ.get("SOAK_WAIT_MAX", "3"))
    )

    def on_start(self) -> None:
        number = next(_key_numbers)
        self.agent_number = number
        self.client.headers["Authorization"] = f"Bearer {KEYS[number % len(KEYS)]}"
        self.principals = [f"person-{number:02d}-{i}" for i in range(4)]
        self.sessions: dict[str, tuple[str, int]] = {}
        self.writes: list[int] = []

    # --- writes ----------------------------------------------------------------------

    def _statement(self) -> tuple[str | None, str, str]:
        """(key, statement, source type): mostly direct statements; some weak sources that wait."""
        choice = random.random()
        nonce = uuid.uuid4().hex[:6]
        if choice < 0.4:
            return (
                "deployment_region",
                f"Deploys to {random.choice(REGIONS)} (ticket {nonce}).",
                "user_statement",
            )
        if choice < 0.7:
            return "preferred_language", f"Prefers {random.choice(LANGUAGES)} for examples.", "user_statement"
        if choice < 0.9:
            return None, f"Asked about {random.choice(TOPICS)} in conversation {nonce}.", "chat_message"
        return None, f"Probably works on {random.choice(TOPICS)} ({nonce}).", "model_inference"

    @task(4)
    def write(self) -> None:
        key, statement, source = self._statement()
        body = {
            "principal": random.choice(self.principals),
            "kind": "episodic" if key is None else "preference",
            "key": key,
            "statement": statement,
            "source": {
                "type": source,
                "ref": f"soak:agent-{self.agent_number}:{uuid.uuid4().hex[:8]}",
                "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        }
        idempotency_key = str(uuid.uuid4())
        for attempt in range(WRITE_RETRIES):
            name = "POST /writes" if attempt == 0 else "POST /writes (retry)"
            with self.client.post(
                "/api/v1/writes",
                json=body,
                headers={"Idempotency-Key": idempotency_key},
                name=name,
                catch_response=True,
            ) as response:
                if response.status_code == 201:
                    write_id = response.json()["id"]
                    self.writes.append(write_id)
                    with _lock:
                        _accepted.write(json.dumps({"id": write_id, "key": idempotency_key}) + "\n")
                    response.success()
                    return
                if response.status_code in (503, 0) or response.status_code >= 500:
                    response.failure(f"HTTP {response.status_code}")
                    time.sleep(float(response.headers.get("Retry-After", "1")))
                    continue
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
                return

    # --- reads -----------------------------------------------------------------------

    @task(4)
    def retrieve(self) -> None:
        principal = random.choice(self.principals)
        session, round_ = self.sessions.get(principal, (f"s-{uuid.uuid4().hex[:10]}", 0))
        if round_ >= 5:
            session, round_ = f"s-{uuid.uuid4().hex[:10]}", 0
        round_ += 1
        self.sessions[principal] = (session, round_)
        self.client.post(
            "/api/v1/retrieve",
            json={
                "principal": principal,
                "session": session,
                "query": "" if round_ == 1 else f"What about {random.choice(TOPICS)}?",
                "round": round_,
                "identity_verified": True,
            },
            name="POST /retrieve",
        )

    @task(1)
    def memories(self) -> None:
        with self.client.get(
            f"/api/v1/principals/{random.choice(self.principals)}/memories",
            name="GET /principals/{id}/memories",
            catch_response=True,
        ) as response:
            # Nobody known yet is a plain answer, not a failure.
            if response.status_code == 404:
                response.success()

    @task(1)
    def read_write(self) -> None:
        if self.writes:
            self.client.get(f"/api/v1/writes/{random.choice(self.writes)}", name="GET /writes/{id}")


@events.quitting.add_listener
def _write_stats(environment: Environment, **kwargs: Any) -> None:
    _accepted.close()
    stats = environment.stats
    operations = {}
    for (name, method), entry in sorted(stats.entries.items()):
        operations[name] = {
            "method": method,
            "requests": entry.num_requests,
            "failures": entry.num_failures,
            "p50_ms": entry.get_response_time_percentile(0.5),
            "p95_ms": entry.get_response_time_percentile(0.95),
            "p99_ms": entry.get_response_time_percentile(0.99),
            "max_ms": round(entry.max_response_time or 0),
            "statuses": dict(STATUSES.get(name, {})),
        }
    total = stats.total
    summary = {
        "requests": total.num_requests,
        "failures": total.num_failures,
        "requests_per_second": round(total.total_rps, 2),
        "p50_ms": total.get_response_time_percentile(0.5),
        "p95_ms": total.get_response_time_percentile(0.95),
        "p99_ms": total.get_response_time_percentile(0.99),
        "operations": operations,
    }
    (OUT / "stats.json").write_text(json.dumps(summary, indent=2))
