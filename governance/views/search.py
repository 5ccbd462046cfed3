"""The console's global search: ``/search/?q=`` over facts, writes, people, sessions and
retrievals of the person's projects (issue 16 item 7; governance.selectors.search)."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance import access
from governance.selectors import search as selectors
from governance.views.base import console_view, replica_reads


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")


@console_view()
@replica_reads
def results(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    found = None
    if form.is_valid() and form.cleaned_data["q"].strip():
        project_ids = access.project_ids_with_role(request.user, access.READ_ROLES)
        found = selectors.search(project_ids, form.cleaned_data["q"])
    return render(
        request,
        "governance/search/results.html",
        {"form": form, "found": found, "several_projects": len(access.memberships(request.user)) > 1},
    )
