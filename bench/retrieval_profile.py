"""Where a retrieval's time goes (issue 13): its statements, its Python, and its ratio to the floor.

Not a test. Run it from the checkout::

    .venv/bin/python bench/retrieval_profile.py --data /tmp/rp --statements --profile
    .venv/bin/python bench/retrieval_profile.py --data /tmp/rp --samples 20
    (cd /path/to/other/checkout && .venv/bin/python bench/retrieval_profile.py --data /tmp/rp --samples 20)

It starts its own embedded PostgreSQL (as ``bench/scale.py`` does), in
``--data`` when given (kept between runs, so old and new code can be timed
one after the other against the same rows) or else in a temporary folder. A
fresh folder is migrated and seeded with ``bench/scale.py``'s generator
(``--facts``, default 100,000, the buckets of ``make bench``). Then:

- with ``--statements``, lists every statement of one round-1 and one later
  retrieval, for a small and the largest principal, with the time each took
  as this client saw it (the sum against the whole call shows the Python);
- times ``--samples`` retrievals per principal-size bucket beside the floor,
  interleaved exactly as ``make bench`` does (``scale.measure_retrieval``),
  and prints p50 per bucket for the floor, round 1 and the later round;
- with ``--profile``, runs cProfile over ``--profile-n`` round-1 and later
  retrievals of small principals and prints the top entries
  (``--profile-round 2`` profiles only the later rounds).

To compare two versions, run this file from each checkout in turn against
the same ``--data`` folder (the checkouts need the same migrations): the
figures then come from the same rows and the same sampling seed. Alternate
the runs; the machine's noise moves both.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import io
import os
import pstats
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _setup(args: argparse.Namespace) -> Path:
    sys.path.insert(0, str(ROOT))
    from bench.scale import _environment

    if args.data:
        folder = Path(args.data).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        _environment(folder)
        os.environ["MEMORYADMIN_PGDATA_CLEANUP"] = "stop"
    else:
        folder = Path(tempfile.mkdtemp(prefix="memoryadmin-retrieval-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _environment(folder)
    return folder


def _buckets(agent: Any) -> dict[str, list[str]]:
    """Project 0's principals by fact count, as ``scale.seed`` groups them."""
    from django.db import connection

    from bench.scale import BUCKETS, _bucket_name, as_superuser

    with as_superuser(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.external_id, count(f.id) FROM governance_principal p "
            "JOIN governance_fact f ON f.principal_id = p.id WHERE p.project_id = %s "
            "GROUP BY p.external_id ORDER BY p.external_id",
            [agent.project_id],
        )
        rows = cursor.fetchall()
    buckets: dict[str, list[str]] = {}
    for external_id, size in sorted(rows, key=lambda r: int(r[0].split("-")[1])):
        for low, high in BUCKETS:
            if low <= size <= high:
                buckets.setdefault(_bucket_name(low, high), []).append(external_id)
    return buckets


def _statements(agent: Any, person: str, label: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.scale import QUERIES
    from governance.services import retrievals as service

    session = f"stmts-{uuid.uuid4().hex[:8]}"
    for round_ in (1, 2):
        timed: list[float] = []

        def clock(
            execute: Any, sql: str, params: Any, many: bool, context: Any, timed: list[float] = timed
        ) -> Any:
            began = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                timed.append((time.perf_counter() - began) * 1000)

        with CaptureQueriesContext(connection) as ctx, connection.execute_wrapper(clock):
            began = time.perf_counter()
            event, _ = service.retrieve(
                agent, service.RetrieveRequest(person, session, QUERIES[round_], round_, True)
            )
            wall = (time.perf_counter() - began) * 1000 - float(event.timings.get("embed_ms", 0))
        queries = ctx.captured_queries
        # BEGIN and COMMIT pass no execute wrapper: Django's own (millisecond) times for them.
        times = iter(timed)
        durations = [
            float(q["time"]) * 1000 if q["sql"] in ("BEGIN", "COMMIT") else next(times, 0.0) for q in queries
        ]
        in_sql = sum(durations)
        print(
            f"\n## {label}, round {round_}: {len(queries)} statements, {wall:.2f} ms "
            f"(statements {in_sql:.2f} ms as seen here, the rest {wall - in_sql:.2f} ms in Python), "
            f"{event.candidate_count} candidates",
            flush=True,
        )
        for q, duration in zip(queries, durations, strict=True):
            sql = " ".join(q["sql"].split())
            print(f"   {duration:7.2f} ms  {sql[:160]}", flush=True)


def _profile(agent: Any, people: list[str], n: int, top: int, rounds: tuple[int, ...] = (1, 2)) -> None:
    from bench.scale import QUERIES
    from governance.services import retrievals as service
    from governance.services.embeddings import embed_query

    # The query embedding is excluded from every retrieval figure: profile without it.
    vectors = {q: embed_query(q) for q in QUERIES}
    service.embed_query = vectors.__getitem__  # type: ignore[attr-defined,assignment]  # patched for the profile only
    # Warm what a process loads once (the tokenizer's tables, the project-fact cache).
    service.retrieve(
        agent, service.RetrieveRequest(people[0], f"warm-{uuid.uuid4().hex[:8]}", QUERIES[0], 1, True)
    )
    profile = cProfile.Profile()
    for i in range(n):
        person = people[i % len(people)]
        session = f"prof-{uuid.uuid4().hex[:8]}"
        query = QUERIES[i % len(QUERIES)]
        for round_ in (1, 2):
            # A later round needs its first; only the rounds asked for are profiled.
            if round_ in rounds:
                profile.enable()
            service.retrieve(agent, service.RetrieveRequest(person, session, query, round_, True))
            profile.disable()
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(top)
        print(out.getvalue())


def _cpu(agent: Any, buckets: dict[str, list[str]], n: int) -> None:
    """CPU per retrieval, this process's and its database backend's, by bucket and round.

    On a shared machine wall times swing with the load; the CPU each side
    spends on one retrieval (Linux schedstat) swings far less, and is what a
    round trip, a plan or a line of Python costs.
    """
    from django.db import connection

    from bench.scale import QUERIES
    from bench.writes_profile import _schedstat
    from governance.services import retrievals as service
    from governance.services.embeddings import embed_query

    vectors = {q: embed_query(q) for q in QUERIES}
    service.embed_query = vectors.__getitem__  # type: ignore[attr-defined,assignment]  # excluded from the figures
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    from bench.scale import floor
    from governance.models import Principal

    ids = dict(Principal.objects.filter(project=agent.project).values_list("external_id", "pk"))
    texts = {q: "[" + ",".join(f"{x:.6f}" for x in v or ()) + "]" for q, v in vectors.items()}
    header = f"{'bucket':10} {'round':>5} {'client CPU ms':>14} {'server CPU ms':>14} {'wall ms':>8}"
    print(f"\n{header}  (median of {n}; round 0 is the floor)")
    for name in ("1-20", "21-100", "101-1000", "4001+"):
        people = buckets[name]
        figures: dict[int, list[tuple[float, float, float]]] = {0: [], 1: [], 2: []}
        for i in range(n):
            person = people[i % len(people)]
            session = f"cpu-{uuid.uuid4().hex[:8]}"
            query = QUERIES[i % len(QUERIES)]
            for round_ in (0, 1, 2):
                mine, server = _schedstat("thread-self"), _schedstat(backend)
                began = time.perf_counter()
                if round_ == 0:
                    floor(agent, ids[person], texts[query])
                else:
                    service.retrieve(agent, service.RetrieveRequest(person, session, query, round_, True))
                wall = (time.perf_counter() - began) * 1000
                mine_after, server_after = _schedstat("thread-self"), _schedstat(backend)
                assert mine and server and mine_after and server_after
                figures[round_].append((mine_after[0] - mine[0], server_after[0] - server[0], wall))
        for round_, rows in figures.items():
            client, srv, wall = (sorted(column)[len(column) // 2] for column in zip(*rows, strict=True))
            print(f"{name:10} {round_:>5} {client:>14.2f} {srv:>14.2f} {wall:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="keep the database here (seeded on first use)")
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=0, help="timed retrievals per bucket")
    parser.add_argument("--statements", action="store_true")
    parser.add_argument("--cpu", type=int, default=0, help="CPU per retrieval over this many per bucket")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-n", type=int, default=200)
    parser.add_argument("--profile-bucket", help="profile this bucket's principals (default: 1-100 facts)")
    parser.add_argument("--profile-round", type=int, choices=(1, 2), help="profile only this round")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    folder = _setup(args)
    fresh = not (folder / "seeded").exists()

    import django

    django.setup()
    import logging

    logging.getLogger("axes").setLevel(logging.WARNING)
    from django.core.management import call_command

    from bench.scale import as_superuser, measure_retrieval, seed
    from governance.context import actor_scope
    from governance.models import Agent

    if fresh:
        call_command("migrate", verbosity=0)
        with as_superuser(), actor_scope("bench"):
            data = seed(args.facts, 20_000, 2_000, random.Random(args.seed))
        (folder / "seeded").write_text(str(data["agent"].pk))
    agent = Agent.objects.select_related("project", "active_policy").get(
        pk=int((folder / "seeded").read_text())
    )
    buckets = _buckets(agent)
    # As a web process settles its collector once loaded (memoryadmin/wsgi.py).
    from memoryadmin import collector

    collector.settle()
    import governance

    print(
        f"code from {Path(governance.__file__).parent.parent}; buckets: "
        + ", ".join(f"{k} {len(v)}" for k, v in buckets.items())
    )
    with actor_scope("bench"):
        from governance.services.embeddings import embed_query

        embed_query("warm the model")
        if args.statements:
            small = buckets["1-20"][0]
            _statements(agent, buckets["1-20"][1], "warm-up (project facts cached)")
            _statements(agent, small, f"small principal {small}")
            _statements(agent, buckets["101-1000"][0], "101-1000 facts")
            _statements(agent, buckets["4001+"][0], "largest principal")
        if args.samples:
            result = measure_retrieval(agent, buckets, args.samples, random.Random(args.seed))
            print(
                f"\nround 1 ratio p50 {result['retrieve_round1_ratio_p50']}x, "
                f"later round ratio p50 {result['retrieve_cached_ratio_p50']}x; "
                f"floor p50 {result['floor_p50_ms']} ms"
            )
            print(f"{'principal size':16} {'floor':>8} {'round 1':>8} {'r1 p95':>8} {'later':>8}")
            for name, b in result["by_principal_size"].items():
                print(
                    f"{name:16} {b['floor_p50_ms']:>8} {b['round1_p50_ms']:>8} "
                    f"{b['round1_p95_ms']:>8} {b['cached_p50_ms']:>8}"
                )
        if args.cpu:
            _cpu(agent, buckets, args.cpu)
        if args.profile:
            if args.profile_bucket:
                people = buckets[args.profile_bucket]
            else:
                people = [*buckets["1-20"][:30], *buckets["21-100"][:10]]
            rounds = (args.profile_round,) if args.profile_round else (1, 2)
            _profile(agent, people, args.profile_n, args.top, rounds)


if __name__ == "__main__":
    main()
