"""What the console's filtered lists share: the filter form's project and text fields, the
cursor, and the links that keep the filters (facts, people, sessions; issue 16 item 7).

Filters live in the query string, so a filtered list is a link to share; the
form is a plain GET form, and with htmx a change swaps only the results.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from governance.models import Project
from governance.rules.labels import label_for

ANY = ("", "any")
PAGE_SIZE = 50


def choices(vocabulary: str, codes: list[str]) -> list[tuple[str, str]]:
    """Options labelled in plain language (the codes stay in the URL)."""
    return [ANY, *((code, label_for(vocabulary, code).text) for code in codes)]


class ListForm(forms.Form):
    project = forms.ChoiceField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Text")
    cursor = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def __init__(self, *args: Any, projects: list[Project], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._projects = {p.slug: p.pk for p in projects}
        field = self.fields["project"]
        field.choices = [ANY, *((p.slug, p.name) for p in projects)]  # type: ignore[attr-defined]
        if len(projects) < 2:
            field.widget = forms.HiddenInput()  # one project: nothing to choose

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


def render_list(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page, or only its results for an htmx filter change (not a history restore)."""
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        template += "#results"
    response = render(request, template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response
