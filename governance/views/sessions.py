"""The console's session page: rounds, writes, the summary with its R17 check, the resume hint.

Read-only, for every console role. Everything it shows about the
conversation (queries, statements, the summary, its source, the hint) is
attacker-controlled memory text: the template renders it escaped inside
``hx-disable`` containers (STYLE.md).
"""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from governance.models import Agent
from governance.rules.retrieval import MODES
from governance.selectors import sessions as selectors
from governance.views.base import console_view, get_scoped, replica_reads
from governance.views.lists import PAGE_SIZE, ListForm, choices, render_list

TEMPLATE = "governance/sessions/detail.html"


@console_view()
@replica_reads
def detail(request: HttpRequest, session_id: int) -> HttpResponse:
    # Scoped lookup: another project's session id answers 404, not 403 (R1).
    session = get_scoped(request, selectors.sessions_for_page(), pk=session_id)
    return render(request, TEMPLATE, {"page": selectors.session_page(session)})


class SessionFilterForm(ListForm):
    agent = forms.ChoiceField(required=False)
    principal = forms.CharField(required=False, max_length=200, label="Person (their id)")
    mode = forms.ChoiceField(required=False, choices=choices("mode", list(MODES)))
    text_label = "Session id contains"
    field_order = ["project", "agent", "principal", "mode", "q"]


@console_view()
@replica_reads
def index(request: HttpRequest) -> HttpResponse:
    form = SessionFilterForm.for_request(request)
    agents = list(
        Agent.objects.filter(project_id__in=form.project_ids())
        .order_by("slug")
        .values_list("slug", flat=True)
        .distinct()
    )
    form.fields["agent"].choices = [("", "any"), *((slug, slug) for slug in agents)]  # type: ignore[attr-defined]
    page = None
    if form.is_valid():
        data = form.cleaned_data
        filters = selectors.SessionFilters(
            project=form.project_id(),
            agent=data["agent"] or None,
            principal=data["principal"].strip() or None,
            mode=data["mode"] or None,
            text=form.text(),
        )
        page = selectors.session_list(form.project_ids(), filters, cursor=data["cursor"], limit=PAGE_SIZE)
    return render_list(
        request, "governance/sessions/index.html", reverse("sessions:index"), form, page, rows="sessions"
    )
