"""Running the agents (Locust, headless) against a stack, and checking what they leave behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.soak.stack import ROOT, Stack, wait_for

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


@dataclass
class LoadRun:
    """A Locust run in the background; ``finish()`` waits for it and reads its figures."""

    stack: Stack
    out: Path
    agents: int
    seconds: int
    popen: subprocess.Popen[bytes]
    started: float

    def finish(self) -> dict[str, Any]:
        try:
            self.popen.wait(timeout=self.seconds + 120)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise
        stats_file = self.out / "stats.json"
        if not stats_file.exists():
            raise RuntimeError("Locust wrote no figures:\n" + (self.out / "locust.log").read_text()[-4000:])
        stats: dict[str, Any] = json.loads(stats_file.read_text())
        stats["agents"] = self.agents
        stats["seconds"] = self.seconds
        stats["server_errors"] = server_errors(stats)
        return stats


def start_load(
    stack: Stack, out: Path, *, agents: int, seconds: int, wait: tuple[float, float] = (1.0, 3.0)
) -> LoadRun:
    out.mkdir(parents=True, exist_ok=True)
    keys = out / "keys.json"
    keys.write_text(json.dumps(stack.keys))
    env = {
        **stack.env(),
        "SOAK_KEYS": str(keys),
        "SOAK_OUT": str(out),
        "SOAK_WAIT_MIN": str(wait[0]),
        "SOAK_WAIT_MAX": str(wait[1]),
    }
    log = open(out / "locust.log", "wb")  # noqa: SIM115 (handed to the child; closed with it)
    popen = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "locust"),
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "--host",
            stack.base_url,
            "--users",
            str(agents),
            # Every agent starts within a few seconds (ten a second).
            "--spawn-rate",
            "10",
            "--run-time",
            f"{seconds}s",
            # An agent's call in flight at the end is let finish.
            "--stop-timeout",
            "30",
            "--only-summary",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    return LoadRun(stack, out, agents, seconds, popen, time.monotonic())


def run_load(stack: Stack, out: Path, *, agents: int, seconds: int) -> dict[str, Any]:
    return start_load(stack, out, agents=agents, seconds=seconds).finish()


def server_errors(stats: dict[str, Any], *, allowed: frozenset[str] = frozenset()) -> dict[str, int]:
    """5xx answers by status, over every operation; ``allowed`` statuses (a fault's 503) are left out."""
    found: dict[str, int] = {}
    for operation in stats["operations"].values():
        for status, count in operation["statuses"].items():
            if status.startswith("5") and status not in allowed:
                found[status] = found.get(status, 0) + count
    return found


def lost_writes(stack: Stack, out: Path) -> dict[str, Any]:
    """Every write the agents saw accepted (201) must be stored, under the key they sent it with."""
    accepted = [json.loads(line) for line in (out / "writes.jsonl").read_text().splitlines() if line]
    ids = [row["id"] for row in accepted]
    stored = dict(stack.sql("SELECT id, idempotency_key FROM governance_write WHERE id = ANY(%s)", [ids]))
    missing = [write_id for write_id in ids if write_id not in stored]
    wrong_key = [row["id"] for row in accepted if row["id"] in stored and stored[row["id"]] != row["key"]]
    # One key, one write: a retried write must not have been stored twice.
    keys = [row["key"] for row in accepted]
    [(rows_for_keys,)] = stack.sql(
        "SELECT count(*) FROM governance_write WHERE idempotency_key = ANY(%s)", [keys]
    )
    return {
        "accepted": len(ids),
        "missing": missing,
        "wrong_key": wrong_key,
        "duplicated": int(rows_for_keys) - len(set(keys)),
    }


def wait_all_embedded(stack: Stack, timeout: float = 300) -> float:
    """Seconds until no active fact lacks its vector (the worker drains its queue, the sweep the rest)."""
    return round(
        wait_for(
            "every active fact to be embedded", lambda: stack.unembedded_active_facts() == 0, timeout, 0.5
        ),
        1,
    )


def table(stats: dict[str, Any]) -> str:
    """The figures as a plain-text table: one row per operation and a total."""
    header = (
        f"{'operation':<34} {'requests':>8} {'errors':>6} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7}  statuses"
    )
    rows = [header, "-" * len(header)]
    for name, op in stats["operations"].items():
        statuses = ", ".join(f"{code}: {count}" for code, count in sorted(op["statuses"].items()))
        rows.append(
            f"{name:<34} {op['requests']:>8} {op['failures']:>6} {op['p50_ms']:>7.0f} {op['p95_ms']:>7.0f} "
            f"{op['p99_ms']:>7.0f}  {statuses}"
        )
    rows.append("-" * len(header))
    rows.append(
        f"{'all':<34} {stats['requests']:>8} {stats['failures']:>6} {stats['p50_ms']:>7.0f} "
        f"{stats['p95_ms']:>7.0f} {stats['p99_ms']:>7.0f}  {stats['requests_per_second']} requests/s"
    )
    return "\n".join(rows)
