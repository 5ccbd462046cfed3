"""Live memory metrics per project and agent, and an agent's seven questions (issue 14 items 5, 7).

Read-only pages for the people who watch and tune what agents get: auditors,
policy editors and administrators of the project (``access.METRICS_ROLES``);
a reviewer of the project gets 403, anyone else 404. Figures come from
``selectors.metrics`` and ``selectors.questions``; this module only turns
them into charts and sentences.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.timesince import timesince

from governance import access
from governance.models import Agent, Project
from governance.rules import questions as question_rules
from governance.rules.labels import label_for
from governance.selectors import metrics as selectors
from governance.selectors import policies as policy_selectors
from governance.selectors.questions import traffic
from governance.views.base import check, console_view, scoped
from governance.views.charts import BarChart, grouped_bars, labelled_rows

LIVE_TEMPLATE = "governance/metrics/live.html"
QUESTIONS_TEMPLATE = "governance/metrics/questions.html"
# Shares of an agent's own budget, so agents with different budgets are never mixed.
SHARE_EDGES = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
SHARE_LABELS = ("under 25%", "25-50%", "50-75%", "75-90%", "90-100%")
CHART = {"width": 400, "height": 200}


def _project(request: HttpRequest, slug: str) -> Project:
    project = get_object_or_404(scoped(request, Project.objects.all(), "pk"), slug=slug)
    check(request, project, access.METRICS_ROLES)
    return project


def _percent(rate: float | None) -> str:
    return "—" if rate is None else f"{100 * rate:.1f}%"


def _single(title: str, labels: list[str], values: list[int]) -> BarChart:
    return grouped_bars(title, labels, {"count": values}, **CHART)


def _charts(project: Project, agent: Agent | None, live: selectors.LiveMetrics) -> dict[str, Any]:
    days = live.per_day
    busiest = max(days, key=lambda d: d[1]) if days else None
    # One date label a week keeps the axis readable on a phone.
    day_labels = [day.strftime("%b %d") if i % 7 == 0 else "" for i, (day, _) in enumerate(days)]
    reasons = live.exclusions
    outcomes = live.writes_by_outcome
    histograms = selectors.token_share_histograms(project, agent, live.window, SHARE_EDGES)
    excluded = sum(n for _, n in reasons)
    top = (
        f"The most common was “{label_for('reason', reasons[0][0]).text.lower()}” ({reasons[0][1]})."
        if reasons
        else ""
    )
    return {
        "per_day": {
            "chart": _single("Retrievals per day", day_labels, [n for _, n in days]),
            "caption": (
                f"The newest {live.retrievals} retrievals, since {live.window.since:%b %d %H:%M}"
                if live.window.capped
                else f"{live.retrievals} retrievals in the last {live.window.days} days"
            )
            + (
                f"; the busiest day, {busiest[0]:%b %d}, had {busiest[1]}." if busiest and busiest[1] else "."
            ),
        },
        "tokens": [
            {
                "agent": slug,
                "chart": labelled_rows(
                    f"Retrievals of {slug} by share of its token budget",
                    list(zip(SHARE_LABELS, counts, strict=True)),
                ),
                "caption": f"{slug}: {sum(counts)} retrievals; {counts[-1]} used 90% or more of the budget "
                "(each agent is measured against its own budget).",
            }
            for slug, counts in histograms
        ],
        "exclusions": {
            "chart": labelled_rows(
                "Left out, by reason", [(label_for("reason", r).text, n) for r, n in reasons]
            ),
            "caption": f"{excluded} times a candidate memory was left out of a context. {top}".strip(),
        },
        "outcomes": {
            "chart": labelled_rows(
                "Writes by what happened on arrival", [(label_for("status", o).text, n) for o, n in outcomes]
            ),
            "caption": f"{live.writes} writes arrived; {_percent(live.quarantine_rate)} were quarantined "
            "by the write guard for a person to look at.",
        },
    }


@console_view()
def live_index(request: HttpRequest) -> HttpResponse:
    """The projects (and their agents) whose live figures this person may see."""
    projects = access.projects_with_role(request.user, access.METRICS_ROLES).order_by("slug")
    agents = Agent.objects.filter(project__in=projects).select_related("project").order_by("slug")
    rows = [(project, [a for a in agents if a.project_id == project.pk]) for project in projects]
    return render(request, "governance/metrics/index.html", {"rows": rows})


@console_view()
def live(request: HttpRequest, project: str, agent: str | None = None) -> HttpResponse:
    obj = _project(request, project)
    chosen = get_object_or_404(Agent, project=obj, slug=agent) if agent else None
    metrics = selectors.live_metrics(obj, chosen)
    now = timezone.now()
    oldest = metrics.queue.oldest_at
    context = {
        "project": obj,
        "agent": chosen,
        "agents": obj.agents.order_by("slug"),
        "m": metrics,
        "indicators": metrics.indicators,
        "rates": {
            "wrong": _percent(metrics.indicators.wrong_rate),
            "stale_used": _percent(metrics.indicators.stale_used_rate),
            "later_superseded": _percent(metrics.indicators.later_superseded_rate),
            "later_taken_out": _percent(metrics.indicators.later_taken_out_rate),
            "quarantine": _percent(metrics.quarantine_rate),
        },
        "oldest_words": timesince(oldest, now) if oldest is not None else "",
        **_charts(obj, chosen, metrics),
    }
    return render(request, LIVE_TEMPLATE, context)


@console_view()
def questions(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    obj = get_object_or_404(policy_selectors.agent(access.projects_of(request.user), project, agent))
    check(request, obj.project_id, access.METRICS_ROLES)
    assert obj.active_policy is not None, "every agent has an active policy version"
    measured = traffic(obj)
    answers = question_rules.seven_questions(obj.active_policy.policy, measured)
    return render(
        request,
        QUESTIONS_TEMPLATE,
        {
            "agent": obj,
            "version": obj.active_policy,
            "traffic": measured,
            "questions": answers,
            "open_count": sum(1 for q in answers if not q.answered),
        },
    )
