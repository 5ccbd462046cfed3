"""Benchmark of the console's retrieval log at scale (issue 4 item 7): keyset pages over N events.

Not a test: it inserts a million rows and takes a minute or two. Run it from the checkout::

    .venv/bin/python bench/retrieval_log.py                  # 1,000,000 events
    .venv/bin/python bench/retrieval_log.py --events 200000  # quicker
    .venv/bin/python bench/retrieval_log.py --keep           # leave the database for psql

It creates a throwaway database ``test_memoryadmin_bench`` with Django's test-database machinery on the
configured server (the embedded PostgreSQL under ``.data/postgres``, or ``DATABASE_URL``; set
``MEMORYADMIN_PGDATA=/tmp/bench-pg MEMORYADMIN_PGDATA_CLEANUP=delete`` to use a separate embedded server),
migrates it, inserts the events with one ``generate_series`` INSERT (three events per second, so
timestamps tie and only the id orders them), runs ``VACUUM ANALYZE``, then ``EXPLAIN (ANALYZE,
BUFFERS)``s the exact SQL that ``governance.selectors.retrievals.retrieval_log`` sends for:

- the first page, and a page 90 % of the way down (keyset cursor), unfiltered and per agent;
- a principal's first page; common, rare and over-budget exclusion-reason filters;
- for contrast, the same deep page fetched with OFFSET, which the log never does.

If the schema has no GIN index on ``reasons`` (migration 0006 adds one), it builds one and measures
the reason filters again, to show why it is there.

For each it prints the execution time (median of three warm runs), the indexes the plan used and
whether it sorted, plus the wall time of a whole ``retrieval_log()`` call (both of its queries).
The database is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")

import django  # noqa: E402 (settings must be configured first)

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

from governance.context import actor_scope  # noqa: E402
from governance.models import Agent, Project, RetrievalEvent  # noqa: E402
from governance.selectors import retrievals as selectors  # noqa: E402
from governance.services import agents as agent_service  # noqa: E402

PAGE = 50
AGENTS = 4
PRINCIPALS = 10_000
START = datetime(2025, 1, 1, tzinfo=UTC)

INSERT_EVENTS = """
INSERT INTO governance_retrievalevent (
    project_id, agent_id, principal_id, session_id, policy_version_id, round, query, mode,
    identity_verified, context, tokens_used, token_budget, candidate_count, excluded_count,
    reasons, timings, static_block_cached, created_at)
SELECT
    -- one event in ten belongs to another project, which the auditor must never page through
    CASE WHEN i %% 10 = 9 THEN %(other)s ELSE %(project)s END,
    CASE WHEN i %% 10 = 9 THEN %(other_agent)s ELSE (%(agents)s::bigint[])[1 + i %% %(n_agents)s] END,
    CASE WHEN i %% 10 = 9 THEN NULL
         ELSE (%(principals)s::bigint[])[1 + ((i::bigint * 7919) %% %(n_principals)s)::int] END,
    NULL,
    CASE WHEN i %% 10 = 9 THEN %(other_version)s ELSE (%(versions)s::bigint[])[1 + i %% %(n_agents)s] END,
    1, '', (ARRAY['resume', 'confirm', 'new'])[1 + i %% 3], true,
    'About the user: event ' || i, 100 + i %% 500, 600, 20, 5,
    CASE
        WHEN i %% 5000 = 0 THEN '["conflict_lost", "stale"]'
        WHEN i %% 20 = 0 THEN '["over_budget", "stale"]'
        ELSE '["stale"]'
    END::jsonb,
    '{}'::jsonb, false,
    %(start)s::timestamptz + (i / 3) * interval '1 second'
FROM generate_series(1, %(n)s) AS i
"""


def explain(sql: str, params: Any, runs: int = 3) -> dict[str, Any]:
    """Median warm execution time, indexes used, and whether a Sort node appeared."""
    times, plan = [], None
    with connection.cursor() as cursor:
        cursor.execute(sql, params)  # warm the cache
        for _ in range(runs):
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
            raw = cursor.fetchone()[0]
            result = raw[0] if isinstance(raw, list) else json.loads(raw)[0]
            times.append(result["Execution Time"])
            plan = result["Plan"]
    indexes: set[str] = set()
    nodes: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        nodes.append(node["Node Type"])
        if "Index Name" in node:
            indexes.add(node["Index Name"])
        for child in node.get("Plans", []):
            walk(child)

    assert plan is not None
    walk(plan)
    return {
        "ms": statistics.median(times),
        "indexes": sorted(indexes),
        "sorted": any(n in ("Sort", "Incremental Sort") for n in nodes),
        "rows": plan.get("Actual Rows"),
        "top": plan["Node Type"],
    }


def keys_sql(project_ids: list[int], filters: selectors.LogFilters, after: selectors.Cursor | None) -> Any:
    qs = selectors.retrieval_log_keys(project_ids, filters, after=after, limit=PAGE + 1)
    assert qs is not None
    return qs.query.get_compiler(using="default").as_sql()


def wall_ms(projects: Any, filters: selectors.LogFilters, after: selectors.Cursor | None) -> float:
    selectors.retrieval_log(projects, filters, after=after, limit=PAGE)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        selectors.retrieval_log(projects, filters, after=after, limit=PAGE)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def seed(n: int) -> Project:
    with actor_scope("bench"):
        project = agent_service.ensure_project("bench", name="Benchmark")
        other = agent_service.ensure_project("bench-other", name="Another tenant")
        agents = [agent_service.ensure_agent(project, f"agent-{k}") for k in range(AGENTS)]
        other_agent = agent_service.ensure_agent(other, "other-agent")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO governance_principal (project_id, external_id, created_at) "
            "SELECT %s, 'user-' || i, now() FROM generate_series(1, %s) AS i",
            [project.pk, PRINCIPALS],
        )
        cursor.execute(
            "SELECT array_agg(id ORDER BY id) FROM governance_principal WHERE project_id = %s", [project.pk]
        )
        principals = cursor.fetchone()[0]
        started = time.perf_counter()
        cursor.execute(
            INSERT_EVENTS,
            {
                "project": project.pk,
                "other": other.pk,
                "agents": [a.pk for a in agents],
                "versions": [a.active_policy_id for a in agents],
                "other_agent": other_agent.pk,
                "other_version": other_agent.active_policy_id,
                "principals": principals,
                "n_agents": AGENTS,
                "n_principals": PRINCIPALS,
                "start": START,
                "n": n,
            },
        )
        print(f"inserted {n:,} events in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        # Every table, so joins are planned on real statistics, as autovacuum would leave them.
        cursor.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE in {time.perf_counter() - started:.1f} s")
    return project


def measure(name: str, projects: Any, filters: selectors.LogFilters, after: selectors.Cursor | None) -> None:
    project_ids = list(projects.values_list("pk", flat=True))
    sql, params = keys_sql(project_ids, filters, after)
    figures = explain(sql, params)
    call = wall_ms(projects, filters, after)
    sort = "yes" if figures["sorted"] else "no"
    indexes = ", ".join(figures["indexes"]) or figures["top"]
    print(f"{name:36} {figures['ms']:9.2f} {call:9.2f} {figures['rows']:>5}  {sort:4}  {indexes}")


def run(n: int) -> None:
    project = seed(n)
    projects = Project.objects.filter(pk=project.pk)
    agent = Agent.objects.filter(project=project).order_by("slug").first()
    assert agent is not None
    in_project = RetrievalEvent.objects.filter(project=project).count()
    deep_offset = int(in_project * 0.9)
    deep = (
        RetrievalEvent.objects.filter(project=project)
        .order_by(*selectors.LOG_ORDER)
        .values_list("created_at", "id")[deep_offset]
    )
    agent_rows = RetrievalEvent.objects.filter(agent=agent).count()
    agent_deep = (
        RetrievalEvent.objects.filter(agent=agent)
        .order_by(*selectors.LOG_ORDER)
        .values_list("created_at", "id")[int(agent_rows * 0.9)]
    )
    # A principal of this project that has events (the modulo spread leaves some without).
    person = (
        RetrievalEvent.objects.filter(project=project, principal__isnull=False)
        .values_list("principal__external_id", flat=True)
        .first()
    )
    print(f"{in_project:,} events in the auditor's project; deep page starts after row {deep_offset:,}\n")

    none = selectors.LogFilters()
    cases: list[tuple[str, selectors.LogFilters, selectors.Cursor | None]] = [
        ("first page", none, None),
        ("deep page (90 %)", none, deep),
        ("agent: first page", selectors.LogFilters(agent=agent.slug), None),
        ("agent: deep page (90 %)", selectors.LogFilters(agent=agent.slug), agent_deep),
        ("principal: first page", selectors.LogFilters(principal=person), None),
        ("reason=stale (every event)", selectors.LogFilters(reason="stale"), None),
        ("over budget (1 in 20)", selectors.LogFilters(over_budget=True), None),
        ("reason=conflict_lost (1 in 5000)", selectors.LogFilters(reason="conflict_lost"), None),
        ("conflict_lost, deep page", selectors.LogFilters(reason="conflict_lost"), deep),
    ]
    print(f"{'case':36} {'SQL ms':>9} {'call ms':>9} {'rows':>5}  sort  indexes")
    for name, filters, after in cases:
        measure(name, projects, filters, after)

    # An exclusion-reason filter walks the log index until it has a page; for a rare reason that
    # is most of the index. A GIN index on the reasons array lets the planner fetch the few
    # matching rows and sort them instead. Measured here as an experiment if the schema lacks it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'governance_retrievalevent' "
            "AND indexdef ILIKE '%%gin%%reasons%%'"
        )
        has_gin = cursor.fetchone()[0] > 0
        if not has_gin:
            started = time.perf_counter()
            cursor.execute(
                "CREATE INDEX bench_retrieval_reasons_gin ON governance_retrievalevent "
                "USING gin (reasons jsonb_path_ops)"
            )
            cursor.execute("ANALYZE governance_retrievalevent")
            print(
                f"\nwith an experimental GIN (reasons jsonb_path_ops) index, built in "
                f"{time.perf_counter() - started:.1f} s:"
            )
            for name, filters, after in cases:
                if filters.reason or filters.over_budget:
                    measure(name, projects, filters, after)

    offset_sql = (
        "SELECT created_at, id FROM governance_retrievalevent WHERE project_id = %s "
        f"ORDER BY created_at DESC, id DESC LIMIT {PAGE + 1} OFFSET {deep_offset}"
    )
    figures = explain(offset_sql, [project.pk])
    print(
        f"{'contrast: deep page with OFFSET':36} {figures['ms']:9.2f} {'':>9} {figures['rows']:>5}  "
        f"{'yes' if figures['sorted'] else 'no':4}  {', '.join(figures['indexes'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="how many events to insert")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    args = parser.parse_args()

    connection.settings_dict.setdefault("TEST", {})["NAME"] = "test_memoryadmin_bench"
    old_config = setup_databases(verbosity=1, interactive=False, keepdb=False)
    try:
        run(args.events)
    finally:
        if args.keep:
            print(f"kept database {connection.settings_dict['NAME']}")
        else:
            teardown_databases(old_config, verbosity=1)


if __name__ == "__main__":
    main()
