"""Benchmark: concurrent writers of ONE project's audit trail (not a test; issue 13).

    .venv/bin/python bench/audit_writers.py                 # 8 writers x 200 transactions
    .venv/bin/python bench/audit_writers.py -w 8 -n 200 --work-ms 2

Without DATABASE_URL it starts a throwaway embedded PostgreSQL (bench/audit_export.py).
Each writer thread runs N transactions of its own, each recording one audit
entry with ``audit.record`` and then holding the transaction ``--work-ms``
longer (the rest of a write's statements before its commit). It reports the
statements one ``record`` sends, the wall time, and the median and 95th
percentile time per transaction. Where the service seals (``audit.seal``), it
then times sealing everything the writers left, as one sealer would, and
checks the chain. The broker is in memory, so the seal tasks queued on commit
are never run: sealing is timed on its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-w", "--writers", type=int, default=8)
    parser.add_argument("-n", "--transactions", type=int, default=200, help="per writer")
    parser.add_argument(
        "--work-ms", type=float, default=0.0, help="time each transaction stays open after record"
    )
    parser.add_argument("--keep", action="store_true", help="keep the embedded database folder")
    args = parser.parse_args()

    from bench.audit_export import _setup_database

    _setup_database(args.keep)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
    os.environ["CELERY_BROKER_URL"] = "memory://"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from governance.context import actor_scope
    from governance.selectors.audit import verify_chain
    from governance.services import agents, audit

    call_command("migrate", verbosity=0)
    with actor_scope("bench"):
        project = agents.ensure_project("bench-writers", name="Bench writers")

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        audit.record(project, "bench.noted", project, reason="warm-up")
    statements = [q["sql"] for q in queries.captured_queries]
    print(f"statements per record(): {len(statements)}")
    for sql in statements:
        print(f"  {sql[:110]}")

    durations: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(args.writers + 1)

    def writer(index: int) -> None:
        mine = []
        start.wait()
        for i in range(args.transactions):
            began = time.perf_counter()
            with actor_scope(f"bench-{index}"), transaction.atomic():
                audit.record(project, "bench.noted", project, reason=f"writer {index} #{i}")
                if args.work_ms:
                    time.sleep(args.work_ms / 1000)
            mine.append(time.perf_counter() - began)
        connection.close()
        with lock:
            durations.extend(mine)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    total = args.writers * args.transactions
    cuts = statistics.quantiles(durations, n=20)
    print(
        f"{args.writers} writers x {args.transactions} transactions (work {args.work_ms} ms): "
        f"wall {wall:.2f} s, {total / wall:.0f} tx/s, "
        f"median {statistics.median(durations) * 1000:.1f} ms, p95 {cuts[18] * 1000:.1f} ms"
    )
    if hasattr(audit, "seal"):
        began = time.perf_counter()
        sealed = audit.seal(project.pk)
        seconds = time.perf_counter() - began
        print(f"sealed {sealed} entries in {seconds:.2f} s ({sealed / seconds:.0f} entries/s, one sealer)")
    assert verify_chain(project.pk) is None
    print("chain verified")


if __name__ == "__main__":
    main()
