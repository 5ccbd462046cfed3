"""Console pages for retrievals: the log, one event, and what an agent believes about a person.

Every page reads through ``governance.selectors.retrievals``; the two actions
on the principal page call ``governance.services.facts``. Memory text
(statements, queries, the injected context) is attacker-controlled: templates
render it escaped inside ``hx-disable`` containers (STYLE.md).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from governance import access
from governance.models import Agent, Principal, Project, RetrievalEvent
from governance.rules.labels import label_for
from governance.rules.retrieval import MODES, REASONS
from governance.selectors import retrievals as selectors
from governance.selectors.sessions import principal_sessions
from governance.views.base import PagedFilterForm, console_view, get_scoped, page_or_fragment, replica_reads

PAGE_SIZE = 50
_ANY = ("", "any")


class LogFilterForm(PagedFilterForm):
    field_order = ["agent", "principal", "session", "since", "until"]

    agent = forms.ChoiceField(required=False)
    principal = forms.CharField(required=False, max_length=200, label="Person (their id)")
    session = forms.CharField(required=False, max_length=200, label="Session (external id)")
    mode = forms.ChoiceField(required=False, choices=[_ANY, *((m, label_for("mode", m).text) for m in MODES)])
    reason = forms.ChoiceField(
        required=False,
        choices=[_ANY, *((r, label_for("reason", r).text) for r in REASONS)],
        label="Excluded for",
    )
    over_budget = forms.BooleanField(required=False, label="Over budget")
    listing = "events"

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Form.fields is typed as Field in the stubs; this one is a ChoiceField.
        self.fields["agent"].choices = [_ANY, *((slug, slug) for slug in agents)]  # type: ignore[attr-defined]

    def decode_cursor(self, value: str) -> selectors.Cursor:
        return selectors.decode_cursor(value)

    def filters(self) -> selectors.LogFilters:
        data = self.cleaned_data
        return selectors.LogFilters(
            agent=data["agent"] or None,
            principal=data["principal"].strip() or None,
            session=data["session"].strip() or None,
            mode=data["mode"] or None,
            reason=data["reason"] or None,
            since=data["since"],
            until=data["until"],
            over_budget=data["over_budget"],
        )


def _with_query(url: str, params: dict[str, Any]) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "", False)})
    return f"{url}?{query}" if query else url


@console_view()
@replica_reads
def log(request: HttpRequest) -> HttpResponse:
    projects = access.projects_of(request.user)
    agents = list(
        Agent.objects.filter(project__in=projects).order_by("slug").values_list("slug", flat=True).distinct()
    )
    form = LogFilterForm(request.GET, agents=agents)
    page = selectors.LogPage(events=[], next_cursor=None)
    if form.is_valid():
        page = selectors.retrieval_log(
            projects, form.filters(), after=form.cleaned_data["cursor"], limit=PAGE_SIZE
        )
    base = reverse("retrievals:log")
    # Pager links keep the filters as sent; a new filter submission never carries a cursor.
    params = {k: v for k, v in request.GET.items() if k != "cursor"}
    context = {
        "form": form,
        "events": page.events,
        # Agent slugs repeat across projects; name the project when the page mixes them.
        "several_projects": len({e.project_id for e in page.events}) > 1,
        "older_url": _with_query(base, {**params, "cursor": page.next_cursor}) if page.next_cursor else None,
        "newest_url": _with_query(base, params) if request.GET.get("cursor") else None,
    }
    return page_or_fragment(request, "governance/retrievals/log.html", "log_results", context)


@console_view()
@replica_reads
def detail(request: HttpRequest, event_id: int) -> HttpResponse:
    event = get_scoped(
        request,
        RetrievalEvent.objects.select_related("project", "agent", "principal", "session", "policy_version"),
        pk=event_id,
    )
    candidates = list(selectors.event_candidates(event))
    return render(
        request,
        "governance/retrievals/detail.html",
        {
            "event": event,
            "candidates": candidates,
            "tokens_percent": round(selectors.tokens_fraction(event) * 100),
            "selected_count": sum(1 for c in candidates if c.decision == "selected"),
        },
    )


@console_view()
@replica_reads
def principal(request: HttpRequest, project: str, external_id: str) -> HttpResponse:
    project_obj: Project = get_object_or_404(access.projects_of(request.user), slug=project)
    can_review = access.has_role(request.user, project_obj, access.REVIEW_ROLES)
    person = get_object_or_404(
        Principal.objects.select_related("project"), project=project_obj, external_id=external_id
    )
    agents = list(
        Agent.objects.filter(project=project_obj, retired_at__isnull=True)
        .select_related("active_policy")
        .order_by("slug")
    )
    wanted = request.GET.get("agent")
    agent = next((a for a in agents if a.slug == wanted), agents[0] if agents else None)
    version = agent.active_policy if agent else None
    policy = version.policy if version else None
    return render(
        request,
        "governance/retrievals/principal.html",
        {
            "principal": person,
            "agents": agents,
            "agent": agent,
            "policy": policy,
            "policy_version": version,
            "groups": selectors.principal_beliefs(person, policy, now=timezone.now()),
            "sessions": principal_sessions(person),
            "log_url": _with_query(reverse("retrievals:log"), {"principal": person.external_id}),
            # The actions on this page follow the role in this principal's project.
            "can_review": can_review,
        },
    )
