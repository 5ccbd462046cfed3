"""Reads for the memory-quality pages: run history and one run's results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from governance.models import EvaluationRun
from governance.rules import evaluations as rules

HISTORY_LIMIT = 50


def run_history(limit: int = HISTORY_LIMIT) -> QuerySet[EvaluationRun]:
    """The newest runs first; their per-scenario results stay out of the listing's query."""
    return (
        EvaluationRun.objects.select_related("started_by")
        .defer("scenarios")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass(frozen=True)
class MetricCell:
    metric: str
    label: str
    value: float
    threshold: float
    at_least: bool
    missed: bool


@dataclass(frozen=True)
class ScenarioRow:
    name: str
    file: str
    passed: bool
    cells: tuple[MetricCell, ...]
    tokens_per_retrieval: float
    notes: tuple[str, ...]
    error: str
    failed_checks: int


def _cells(values: dict[str, Any], thresholds: dict[str, float], missed: list[str]) -> tuple[MetricCell, ...]:
    return tuple(
        MetricCell(
            metric=metric,
            label=rules.METRIC_LABELS[metric],
            value=float(values.get(metric, 0.0)),
            threshold=float(thresholds.get(metric, rules.DEFAULT_THRESHOLDS[metric])),
            at_least=metric in rules.AT_LEAST,
            missed=metric in missed,
        )
        for metric in rules.METRICS
    )


def scenario_rows(run: EvaluationRun) -> list[ScenarioRow]:
    """One row per scenario, failing ones first, as stored when the run finished."""
    rows = [
        ScenarioRow(
            name=str(stored.get("name", "")),
            file=str(stored.get("file", "")),
            passed=bool(stored.get("passed")),
            cells=_cells(stored, stored.get("thresholds") or {}, list(stored.get("missed") or [])),
            tokens_per_retrieval=float(stored.get("tokens_per_retrieval", 0.0)),
            notes=tuple(stored.get("notes") or ()),
            error=str(stored.get("error") or ""),
            failed_checks=int((stored.get("counts") or {}).get("checks_failed", 0)),
        )
        for stored in run.scenarios
    ]
    return sorted(rows, key=lambda row: (row.passed, row.name))


def overall_cells(run: EvaluationRun) -> tuple[MetricCell, ...]:
    if not run.overall:
        return ()
    missed = rules.missed(
        {m: float(run.overall.get(m, 0.0)) for m in rules.METRICS}, rules.DEFAULT_THRESHOLDS
    )
    return _cells(run.overall, dict(rules.DEFAULT_THRESHOLDS), missed)
