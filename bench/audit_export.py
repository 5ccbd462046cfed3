"""Benchmark: stream the audit history export over N audit entries (not a test).

    .venv/bin/python bench/audit_export.py               # 1,000,000 entries
    .venv/bin/python bench/audit_export.py -n 200000 --format jsonl

Without DATABASE_URL it starts a throwaway embedded PostgreSQL in a temporary
folder (deleted afterwards), so it never touches the ``make run`` database.
It inserts N hash-chained audit entries (plus ``--retrievals`` retrieval
events) with COPY, then downloads the export through the console URL, as a
signed-in auditor, reading the streamed body chunk by chunk. It reports the
time to first byte, total time, rows and bytes, and the process's resident
memory before and at its peak during the download (sampled every chunk).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _setup_database(keep: bool) -> None:
    if os.environ.get("DATABASE_URL"):
        return
    folder = Path(tempfile.mkdtemp(prefix="memtest-bench-"))
    os.environ["MEMORYADMIN_PGDATA"] = str(folder / "pgdata")
    os.environ["MEMORYADMIN_PGDATA_CLEANUP"] = "stop" if keep else "delete"
    os.environ.setdefault("DATABASE_NAME", "bench_audit")
    if not keep:
        # Registered before the server starts, so it runs after the server's own exit hook stops it.
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    print(f"embedded PostgreSQL in {folder}", flush=True)


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _insert(n: int, retrievals: int) -> tuple[Any, float]:
    from django.contrib.auth.models import User
    from django.db import connection

    from governance.context import actor_scope
    from governance.models import AuditEntry, Membership
    from governance.rules.audit import GENESIS, entry_digest
    from governance.services import agents, audit

    with actor_scope("bench"):
        project = agents.ensure_project("bench", name="Bench")
        agent = agents.ensure_agent(project, "bench-bot")
    user = User.objects.create_user("bench-auditor", password="x")
    Membership.objects.create(user=user, project=project, role="auditor")

    # Bulk rows are written sealed, continuing the project's sealed chain.
    audit.seal(project.pk)
    last = AuditEntry.objects.filter(project=project, sequence__isnull=False).order_by("-sequence").first()
    sequence = last.sequence or 0 if last else 0
    previous = last.entry_hash if last else GENESIS
    start = datetime.now(UTC) - timedelta(seconds=n + 10)
    began = time.perf_counter()
    raw = connection.connection  # the psycopg connection: COPY streams rows without holding them
    with raw.cursor() as cursor:
        columns = (
            "project_id, sequence, actor, action, object_type, object_id, reason, data, request_id, "
            "created_at, previous_hash, entry_hash"
        )
        with cursor.copy(f"COPY governance_auditentry ({columns}) FROM STDIN") as copy:
            for i in range(n):
                sequence += 1
                entry = SimpleNamespace(
                    project_id=project.pk,
                    sequence=sequence,
                    actor=f"agent:bench-bot-{i % 7}",
                    action=("write.submitted", "fact.corroborated", "fact.superseded")[i % 3],
                    object_type="write" if i % 3 == 0 else "fact",
                    object_id=str(i),
                    reason="" if i % 5 else "Benchmark entry with a short reason",
                    data={"outcome": "active", "fact": i, "statement_digest": f"{i:064x}"},
                    created_at=start + timedelta(seconds=i),
                    previous_hash=previous,
                )
                # A stand-in with the fields entry_digest reads, not a model row: rows go in by COPY.
                entry.entry_hash = entry_digest(entry)
                previous = entry.entry_hash
                copy.write_row(
                    (
                        entry.project_id,
                        entry.sequence,
                        entry.actor,
                        entry.action,
                        entry.object_type,
                        entry.object_id,
                        entry.reason,
                        json.dumps(entry.data),
                        "",
                        entry.created_at,
                        entry.previous_hash,
                        entry.entry_hash,
                    )
                )
        if retrievals:
            columns = (
                "project_id, agent_id, policy_version_id, round, query, mode, identity_verified, context, "
                "tokens_used, token_budget, candidate_count, excluded_count, reasons, timings, "
                "static_block_cached, created_at"
            )
            with cursor.copy(f"COPY governance_retrievalevent ({columns}) FROM STDIN") as copy:
                for i in range(retrievals):
                    copy.write_row(
                        (
                            project.pk,
                            agent.pk,
                            agent.active_policy_id,
                            1,
                            "",
                            "resume",
                            True,
                            "context",
                            120,
                            600,
                            9,
                            3,
                            json.dumps(["stale"]),
                            json.dumps({}),
                            False,
                            start + timedelta(seconds=i * (n // max(retrievals, 1)) + 0.5),
                        )
                    )
    raw.commit()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE governance_auditentry")
        cursor.execute("ANALYZE governance_retrievalevent")
    return user, time.perf_counter() - began


def _download(user: Any, fmt: str, path: str) -> dict[str, float]:
    from django.test import Client

    client = Client()
    client.force_login(user)
    baseline = peak = _rss_mb()
    began = time.perf_counter()
    response = client.get(path, {"format": fmt})
    assert response.status_code == 200, response.status_code
    first_byte: float | None = None
    size = lines = 0
    # The test client's response type does not declare the streaming attribute it has.
    for chunk in response.streaming_content:  # type: ignore[attr-defined]
        if first_byte is None:
            first_byte = time.perf_counter() - began
        size += len(chunk)
        lines += chunk.count(b"\n")
        peak = max(peak, _rss_mb())
    response.close()
    return {
        "seconds": time.perf_counter() - began,
        "first_byte_seconds": first_byte or 0.0,
        "lines": lines,
        "megabytes": size / 2**20,
        "rss_before_mb": baseline,
        "rss_peak_mb": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--entries", type=int, default=1_000_000, help="audit entries to insert")
    parser.add_argument("--retrievals", type=int, default=None, help="retrieval events (default n/10)")
    parser.add_argument("--format", choices=("csv", "jsonl", "both"), default="both")
    parser.add_argument("--verify", action="store_true", help="also time manage.py verify_audit's walk")
    parser.add_argument("--keep", action="store_true", help="keep the embedded database folder")
    args = parser.parse_args()
    retrievals = args.entries // 10 if args.retrievals is None else args.retrievals

    _setup_database(args.keep)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    user, insert_seconds = _insert(args.entries, retrievals)
    print(f"inserted {args.entries:,} audit entries + {retrievals:,} retrievals in {insert_seconds:.1f} s")

    if args.verify:
        from governance.selectors.audit import verify_chain

        began = time.perf_counter()
        broken = verify_chain()
        print(
            f"verify_chain: {'intact' if broken is None else broken} in {time.perf_counter() - began:.1f} s"
        )

    for fmt in ("csv", "jsonl") if args.format == "both" else (args.format,):
        result = _download(user, fmt, "/history/export")
        print(
            f"export {fmt}: {result['lines']:,} lines, {result['megabytes']:.0f} MiB "
            f"in {result['seconds']:.1f} s "
            f"(first byte after {result['first_byte_seconds']:.2f} s, "
            f"{result['lines'] / result['seconds']:,.0f} rows/s); "
            f"RSS {result['rss_before_mb']:.0f} MiB before, peak {result['rss_peak_mb']:.0f} MiB "
            f"(+{result['rss_peak_mb'] - result['rss_before_mb']:.0f} MiB)",
            flush=True,
        )


if __name__ == "__main__":
    main()
