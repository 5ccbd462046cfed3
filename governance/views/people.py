"""The console's directory of people: who memory is about, per project (issue 16 item 7)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from governance.selectors import people as selectors
from governance.views.base import console_view
from governance.views.lists import PAGE_SIZE, ListForm, render_list


class PeopleFilterForm(ListForm):
    text_label = "Person's id contains"
    field_order = ["project", "q"]


@console_view()
def directory(request: HttpRequest) -> HttpResponse:
    form = PeopleFilterForm.for_request(request)
    page = None
    if form.is_valid():
        filters = selectors.PeopleFilters(project=form.project_id(), text=form.text())
        page = selectors.people(
            form.project_ids(), filters, cursor=form.cleaned_data["cursor"], limit=PAGE_SIZE
        )
    return render_list(
        request, "governance/people/directory.html", reverse("people:directory"), form, page, rows="people"
    )
