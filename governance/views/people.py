"""The console's directory of people: who memory is about, per project (issue 16 item 7)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from governance import access
from governance.selectors import people as selectors
from governance.views.base import console_view
from governance.views.lists import PAGE_SIZE, ListForm, pager, render_list


class PeopleFilterForm(ListForm):
    field_order = ["project", "q"]


@console_view()
def directory(request: HttpRequest) -> HttpResponse:
    projects = list(access.projects_of(request.user).order_by("slug"))
    form = PeopleFilterForm(request.GET, projects=projects)
    form.fields["q"].label = "Person's id contains"
    page = None
    if form.is_valid():
        filters = selectors.PeopleFilters(project=form.project_id(), text=form.text())
        page = selectors.people(
            [p.pk for p in projects], filters, cursor=form.cleaned_data["cursor"], limit=PAGE_SIZE
        )
    context = {
        "form": form,
        "people": page.items if page else [],
        "several_projects": len(projects) > 1,
        **pager(request, reverse("people:directory"), page.next_cursor if page else None),
    }
    return render_list(request, "governance/people/directory.html", context)
