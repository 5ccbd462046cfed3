"""What the console's filtered lists share: the filter form's project and text fields, the
cursor, and the links that keep the filters (facts, people, sessions; issue 16 item 7).

Filters live in the query string, so a filtered list is a link to share; the
form is a plain GET form, and with htmx a change swaps only the results.
"""

from __future__ import annotations

from typing import Any, Self
from urllib.parse import urlencode

from django import forms
from django.http import HttpRequest, HttpResponse

from governance import access
from governance.models import Project
from governance.rules.labels import label_for
from governance.selectors.pages import Page
from governance.views.base import page_or_fragment

ANY = ("", "any")
PAGE_SIZE = 50


def choices(vocabulary: str, codes: list[str]) -> list[tuple[str, str]]:
    """Options labelled in plain language (the codes stay in the URL)."""
    return [ANY, *((code, label_for(vocabulary, code).text) for code in codes)]


class ListForm(forms.Form):
    project = forms.ChoiceField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Text")
    cursor = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    # What the text filter searches, in the list's words ("Statement has").
    text_label = "Text"

    def __init__(self, *args: Any, projects: list[Project], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._projects = {p.slug: p.pk for p in projects}
        field = self.fields["project"]
        field.choices = [ANY, *((p.slug, p.name) for p in projects)]  # type: ignore[attr-defined]
        if len(projects) < 2:
            field.widget = forms.HiddenInput()  # one project: nothing to choose
        self.fields["q"].label = self.text_label

    @classmethod
    def for_request(cls, request: HttpRequest) -> Self:
        """The filters as sent, over every project the user belongs to."""
        return cls(request.GET, projects=list(access.projects_of(request.user).order_by("slug")))

    def project_ids(self) -> list[int]:
        """Every project the list may show (the project filter narrows it further)."""
        return list(self._projects.values())

    def project_id(self) -> int | None:
        return self._projects.get(self.cleaned_data.get("project") or "")

    def text(self) -> str | None:
        return (self.cleaned_data.get("q") or "").strip() or None


def with_query(url: str, params: dict[str, Any]) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "", False)})
    return f"{url}?{query}" if query else url


def pager(request: HttpRequest, url: str, next_cursor: int | None) -> dict[str, str | None]:
    """The "next" and "first page" links, keeping every filter as sent."""
    params = {k: v for k, v in request.GET.items() if k != "cursor"}
    return {
        "next_url": with_query(url, {**params, "cursor": next_cursor}) if next_cursor is not None else None,
        "first_url": with_query(url, params) if request.GET.get("cursor") else None,
    }


def render_list(
    request: HttpRequest, template: str, url: str, form: ListForm, page: Page[Any] | None, *, rows: str
) -> HttpResponse:
    """The list at ``url`` with its filters and the page's items as ``rows`` (none while the
    filters are invalid), or only its results for an htmx filter change."""
    context = {
        "form": form,
        rows: page.items if page else [],
        "several_projects": len(form.project_ids()) > 1,
        **pager(request, url, page.next_cursor if page else None),
    }
    return page_or_fragment(request, template, "results", context)
