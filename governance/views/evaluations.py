"""The memory-quality pages: every evaluation run with its history, one run's results, starting a run.

Runs belong to no project: their scenarios play in projects made for them,
with made-up people and statements, so every signed-in member may read
them. Starting one takes a worker for minutes, so it needs an administrator
or policy editor of some project (the people who change what agents get).
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from governance import access
from governance.models import Agent, EvaluationRun
from governance.rules import evaluations as rules
from governance.selectors import evaluations as selectors
from governance.selectors.attribution import why_missing
from governance.services import evaluations as service
from governance.views.base import check, checked, console_view, is_htmx, reload_page

RUNS_TEMPLATE = "governance/evaluations/runs.html"
RUN_TEMPLATE = "governance/evaluations/run.html"


@console_view(write_roles=access.POLICY_EDIT_ROLES)
def runs(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    can_start = access.can_anywhere(request.user, access.POLICY_EDIT_ROLES)
    if request.method == "POST":
        if not can_start:
            access.log_denied(request.user, f"{request.method} {request.path}", "evaluation run")
            raise PermissionDenied("Starting a quality run needs an administrator or policy editor role.")
        checked(request)
        shipped = {path.stem: path for path in service.shipped_scenarios()}
        chosen = request.POST.get("scenario", "all")
        if chosen != "all" and chosen not in shipped:
            return _runs_page(request, can_start, error="Choose one of the listed scenarios.", status=400)
        paths = list(shipped.values()) if chosen == "all" else [shipped[chosen]]
        run = service.start_run(paths, user=request.user)
        return HttpResponseRedirect(reverse("quality:run", args=[run.pk]))
    return _runs_page(request, can_start)


def _runs_page(request: HttpRequest, can_start: bool, *, error: str = "", status: int = 200) -> HttpResponse:
    return render(
        request,
        RUNS_TEMPLATE,
        {
            "runs": [(row, selectors.overall_cells(row)) for row in selectors.run_history()],
            "can_start": can_start,
            "scenarios": [path.stem for path in service.shipped_scenarios()],
            "labels": rules.METRIC_LABELS,
            "error": error,
        },
        status=status,
    )


@console_view()
def run(request: HttpRequest, run_id: int) -> HttpResponse:
    evaluation = get_object_or_404(EvaluationRun.objects.select_related("started_by"), pk=run_id)
    context = {
        "run": evaluation,
        "rows": selectors.scenario_rows(evaluation),
        "overall": selectors.overall_cells(evaluation),
        "percent": round(100 * evaluation.progress_done / evaluation.progress_total)
        if evaluation.progress_total
        else 0,
    }
    if is_htmx(request):
        if evaluation.is_finished:
            # The results replace the whole page, not the progress box.
            return reload_page()
        return render(request, f"{RUN_TEMPLATE}#progress", context)
    return render(request, RUN_TEMPLATE, context)


WHY_TEMPLATE = "governance/evaluations/why.html"


class WhyForm(forms.Form):
    project = forms.ChoiceField(label="Project")
    principal = forms.CharField(label="Person (their id)", max_length=200)
    phrase = forms.CharField(label="What it should have known (a few words)", min_length=2, max_length=200)
    agent = forms.SlugField(label="Agent (optional)", max_length=64, required=False)


@console_view()
def why(request: HttpRequest) -> HttpResponse:
    """Why didn't it know? An auditor or product manager names a person and a phrase."""
    projects = list(access.projects_of(request.user).order_by("slug"))
    form = WhyForm(request.GET or None)
    project_field = form.fields["project"]
    assert isinstance(project_field, forms.ChoiceField)
    project_field.choices = [(p.slug, p.name) for p in projects]
    answer = None
    status = 200
    if request.GET:
        if form.is_valid():
            project = next(p for p in projects if p.slug == form.cleaned_data["project"])
            check(request, project)
            agent_slug = form.cleaned_data.get("agent")
            agent = get_object_or_404(Agent, project=project, slug=agent_slug) if agent_slug else None
            answer = why_missing(
                project, form.cleaned_data["principal"], form.cleaned_data["phrase"], agent=agent
            )
        else:
            status = 400
    return render(request, WHY_TEMPLATE, {"form": form, "answer": answer}, status=status)
