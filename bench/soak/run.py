"""``make soak`` (``python -m bench.soak``): the long load run and the four faults, with a report.

    python -m bench.soak [--agents 50] [--seconds 300] [--fault-agents 8] [--no-faults]
                         [--out bench/out/soak.json]

The same from the environment, for ``make soak``: ``SOAK_AGENTS``,
``SOAK_SECONDS``, ``SOAK_FAULT_AGENTS``, ``SOAK_FAULTS`` (0 to skip them),
``SOAK_OUT``. Exits 1 when any check fails: a 5xx in the soak (a fault's
documented 503 aside), a lost or duplicated write, an active fact left
without its vector, or a fault whose outcome is not the one promised in
docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.soak import faults
from bench.soak.load import lost_writes, run_load, table, wait_all_embedded
from bench.soak.stack import Stack


def problems(result: dict[str, Any]) -> list[str]:
    """Every promise the run broke, in words; empty when all held."""
    found: list[str] = []
    soak = result.get("soak")
    if soak:
        if soak["load"]["server_errors"]:
            found.append(f"soak: server errors {soak['load']['server_errors']}")
        lost = soak["lost"]
        if lost["missing"] or lost["wrong_key"] or lost["duplicated"]:
            found.append(f"soak: lost or duplicated writes {lost}")
    fault = result.get("faults", {})
    if "worker_killed" in fault:
        f = fault["worker_killed"]
        if f["embedded_when_killed"] or not f["redelivered_same_task"] or f["embeddings_stored"] != 1:
            found.append(f"worker killed: {f}")
    if "broker_stopped" in fault:
        f = fault["broker_stopped"]
        if set(f["statuses_while_down"]) != {"201"} or f["load"]["server_errors"] or f["lost"]["missing"]:
            found.append(f"broker stopped: {f['statuses_while_down']}, {f['load']['server_errors']}")
    if "postgres_restarted" in fault:
        f = fault["postgres_restarted"]
        bad = [
            a
            for a in f["answers_while_down"]
            if a["status"] != 503 or a["code"] != "unavailable" or not a["retry_after"]
        ]
        others = {code: n for code, n in f["load"]["server_errors"].items() if code != "503"}
        if bad or others or not all(f["processes_alive"].values()) or f["lost"]["missing"]:
            found.append(f"postgres restarted: {bad[:3]}, {others}, {f['processes_alive']}")
    if "crash_after_commit" in fault:
        f = fault["crash_after_commit"]
        if not (f["retry_status"] == 201 and f["retry_returns_stored_response"] and f["rows_for_key"] == 1):
            found.append(f"crash after commit: {f}")
    return found


def report(result: dict[str, Any]) -> str:
    lines = [
        f"Soak run of {result['date']} on {result['machine']['cores']} cores "
        f"(load average at start {result['machine']['load_average_at_start']})"
    ]
    soak = result.get("soak")
    if soak:
        lines += [
            f"{soak['load']['agents']} agents for {soak['load']['seconds']} s:",
            table(soak["load"]),
            f"accepted writes {soak['lost']['accepted']}, missing {len(soak['lost']['missing'])}, "
            f"duplicated {soak['lost']['duplicated']}; every active fact embedded "
            f"{soak['all_embedded_seconds']} s after the run",
        ]
    for name, outcome in result.get("faults", {}).items():
        shown = {k: v for k, v in outcome.items() if k not in {"load", "answers_while_down"}}
        lines.append(f"{name}: {json.dumps(shown)}")
    found = problems(result)
    lines.append("ALL CHECKS HELD" if not found else "FAILED:\n  " + "\n  ".join(found))
    return "\n".join(lines)


def run(*, agents: int, seconds: int, fault_agents: int, with_faults: bool, out: Path) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="memoryadmin-soak-"))
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
        },
    }
    stack = Stack(root, agents=max(agents, fault_agents), visibility_timeout=10, sweep_seconds=10)
    started = time.monotonic()
    try:
        stack.start()
        result["start_seconds"] = round(time.monotonic() - started, 1)
        if seconds > 0:
            load = run_load(stack, root / "soak", agents=agents, seconds=seconds)
            result["soak"] = {
                "load": load,
                "lost": lost_writes(stack, root / "soak"),
                "all_embedded_seconds": wait_all_embedded(stack, timeout=600),
            }
        if with_faults:
            result["faults"] = {
                "worker_killed": faults.worker_killed_mid_embedding(stack),
                "broker_stopped": faults.broker_stopped(stack, root / "broker", agents=fault_agents),
                "postgres_restarted": faults.postgres_restarted(
                    stack, root / "postgres", agents=fault_agents
                ),
                "crash_after_commit": faults.crash_after_commit(stack),
            }
    finally:
        stack.stop()
        # The logs stay for reading; the database goes.
        shutil.rmtree(stack.pgdata, ignore_errors=True)
        result["logs"] = str(stack.logs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=int(env.get("SOAK_AGENTS", "50")))
    parser.add_argument("--seconds", type=int, default=int(env.get("SOAK_SECONDS", "300")))
    parser.add_argument("--fault-agents", type=int, default=int(env.get("SOAK_FAULT_AGENTS", "8")))
    parser.add_argument("--no-faults", action="store_true", default=env.get("SOAK_FAULTS", "1") == "0")
    parser.add_argument("--out", type=Path, default=Path(env.get("SOAK_OUT", "bench/out/soak.json")))
    args = parser.parse_args(argv)
    # The stack's command lines come from run_stack, which reads settings; this
    # process never connects to a database itself, so throwaway secrets do.
    os.environ["DJANGO_SETTINGS_MODULE"] = "memoryadmin.settings"
    for name in ("SECRET_KEY", "TOMBSTONE_KEY"):
        os.environ.setdefault(name, secrets.token_urlsafe(48))
    import django

    django.setup()
    result = run(
        agents=args.agents,
        seconds=args.seconds,
        fault_agents=args.fault_agents,
        with_faults=not args.no_faults,
        out=args.out,
    )
    print(report(result))
    print(f"Figures written to {args.out}")
    return 1 if problems(result) else 0


if __name__ == "__main__":
    sys.exit(main())
