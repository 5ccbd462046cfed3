"""``manage.py memory_eval [files]``: play memory-quality scenarios and report the five metrics.

With no files it plays every shipped scenario (governance/scenarios/). Exits 0
when every scenario meets its thresholds and the pooled rates meet the
shipped targets, 1 on any miss, 2 when a file cannot be used.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.rules import evaluations as rules
from governance.rules import relevance as relevance_rules
from governance.services import evaluations, evaluations_http
from governance.services import relevance as relevance_service

COLUMNS = (
    ("recall", "recall"),
    ("contamination", "contam."),
    ("stale_adoption", "stale"),
    ("cross_project_leakage", "leakage"),
    ("write_back_amplification", "amplif."),
)


def table(report: evaluations.Report) -> str:
    """The per-scenario table a person reads in a terminal."""
    width = max([len("overall"), *(len(r.name) for r in report.scenarios)])
    head = (
        f"{'scenario':<{width}}  " + "  ".join(f"{label:>8}" for _, label in COLUMNS) + "  tokens/ret  result"
    )
    lines = [head, "-" * len(head)]

    def row(name: str, metrics: dict[str, float], tokens: float, verdict: str) -> str:
        cells = "  ".join(f"{metrics[metric]:>8.3f}" for metric, _ in COLUMNS)
        return f"{name:<{width}}  {cells}  {tokens:>10.1f}  {verdict}"

    for result in report.scenarios:
        verdict = "pass" if result.passed else "FAIL"
        if result.missed:
            verdict += " (" + ", ".join(result.missed) + ")"
        if result.error:
            verdict += f" (error: {result.error})"
        lines.append(row(result.name, result.metrics, result.tokens_per_retrieval, verdict))
    lines.append("-" * len(head))
    lines.append(
        row("overall", report.overall, report.tokens_per_retrieval, "pass" if report.passed else "FAIL")
    )
    return "\n".join(lines)


def document(
    report: evaluations.Report, skipped: list[evaluations_http.Skipped] | None = None
) -> dict[str, Any]:
    """The --json document, with exactly the keys issue 14 names; with --url, ``skipped`` too."""
    body: dict[str, Any] = {
        "overall": {metric: report.overall[metric] for metric in rules.METRICS},
        "scenarios": [
            {"name": r.name, **{metric: r.metrics[metric] for metric in rules.METRICS}, "passed": r.passed}
            for r in report.scenarios
        ],
    }
    if skipped is not None:
        body["skipped"] = [{"name": s.name, "reason": s.reason} for s in skipped]
    return body


def relevance_document(rows: tuple[relevance_rules.ThresholdRow, ...]) -> dict[str, Any]:
    """``--relevance`` in ``--json``: the trade-off and the floor the labelled set recommends."""
    return {
        "recommended_floor": relevance_rules.choose_floor(rows).threshold,
        "rows": [row.to_dict() for row in rows],
    }


def relevance_text(rows: tuple[relevance_rules.ThresholdRow, ...]) -> str:
    best = relevance_rules.choose_floor(rows)
    lines = [
        "Relevance floor on the labelled set (docs/relevance.md): recall and precision per floor",
        f"{'floor':>6} {'recall':>7} {'precision':>10} {'F1':>6} {'injected':>9}",
    ]
    for row in rows:
        mark = "  <- recommended" if row.threshold == best.threshold else ""
        lines.append(
            f"{row.threshold:>6.2f} {row.recall:>7.2f} {row.precision:>10.2f} {row.f1:>6.2f} "
            f"{row.injected:>9}{mark}"
        )
    return "\n".join(lines) + "\n"


class Command(BaseCommand):
    help = (
        "Play memory-quality scenarios in projects of their own and report recall, contamination, "
        "stale adoption, cross-project leakage and write-back amplification per scenario and overall. "
        "Exits 1 when any scenario misses a threshold."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "files", nargs="*", help="Scenario YAML files or shipped scenario names (default: all)"
        )
        parser.add_argument(
            "--json", action="store_true", help="Print one JSON document instead of the table"
        )
        parser.add_argument(
            "--relevance",
            action="store_true",
            help="Also report recall and precision per relevance floor on the labelled set "
            "(docs/relevance.md), for the embedder in use",
        )
        parser.add_argument(
            "--verbose-misses", action="store_true", help="List what each failing scenario missed"
        )
        parser.add_argument(
            "--url",
            help="Play through the HTTP API of a running deployment at this address instead of in-process; "
            "scenarios it cannot play there are listed as skipped",
        )
        parser.add_argument(
            "--key",
            help="With --url: the agent key (default: the MEMORY_EVAL_AGENT_KEY environment variable)",
        )
        parser.add_argument(
            "--token",
            help="With --url: a reviewer's personal access token, for scenarios with reviewer decisions "
            "(default: MEMORY_EVAL_TOKEN)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            paths = (
                evaluations.resolve(options["files"]) if options["files"] else evaluations.shipped_scenarios()
            )
        except rules.ScenarioError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        if not paths:
            raise CommandError("No scenarios to play.", returncode=2)
        skipped: list[evaluations_http.Skipped] = []
        run = None
        if options["url"]:
            key = options["key"] or os.environ.get("MEMORY_EVAL_AGENT_KEY")
            if not key:
                raise CommandError("--url needs an agent key: --key or MEMORY_EVAL_AGENT_KEY.", returncode=2)
            token = options["token"] or os.environ.get("MEMORY_EVAL_TOKEN") or None
            remote = evaluations_http.evaluate_remote(paths, options["url"], key=key, token=token)
            report, skipped = remote.report, remote.skipped
        else:
            run = evaluations.create_run(paths, origin="command")
            played = evaluations.execute_run(run.pk)
            assert played is not None, "a run just created is queued"
            report = played
        rows = relevance_service.relevance_table() if options["relevance"] else ()
        if options["json"]:
            doc = document(report, skipped if options["url"] else None)
            if rows:
                doc["relevance"] = relevance_document(rows)
            self.stdout.write(json.dumps(doc, indent=2))
        else:
            self.stdout.write(table(report))
            for item in skipped:
                self.stdout.write(f"skipped {item.name}: {item.reason}")
            if rows:
                self.stdout.write("\n" + relevance_text(rows))
            if run is None:
                self.stdout.write(
                    f"\nPlayed {len(report.scenarios)} over HTTP, skipped {len(skipped)}; not stored."
                )
            else:
                self.stdout.write(f"\nStored as evaluation run {run.pk}.")
        if options["verbose_misses"] or not options["json"]:
            for result in report.scenarios:
                if not result.passed:
                    self.stderr.write(f"{result.name}:{' ' + result.error if result.error else ''}")
                    for note in result.notes[:20]:
                        self.stderr.write(f"  - {note}")
        if not report.passed:
            raise CommandError("At least one scenario missed its thresholds.", returncode=1)
