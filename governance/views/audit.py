"""The auditors' console: the history browser, a fact's full timeline, and the streamed export.

Read-only for every role, with one exception: "verify chain" (POST) queues a
verification job, which any role in the project may start; it changes nothing
but adds the job and an audit entry saying who asked.
Reads go through ``governance.selectors.audit``; audit data holds digests,
never erasable content. Actor labels, reasons and principal ids can come from
agents, so templates render them escaped inside ``hx-disable`` containers.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from governance import access
from governance.exports import export_response
from governance.models import Fact, Job
from governance.rules.export import FORMATS
from governance.selectors import audit as selectors
from governance.selectors import facts as fact_selectors
from governance.services import verification as verification_service
from governance.views.base import (
    PagedFilterForm,
    check,
    console_view,
    get_scoped,
    is_htmx,
    page_or_fragment,
    replica_reads,
)

PAGE_SIZE = 50
# The history page's tabs: decisions and changes apart from retrieval traffic (which outnumbers them).
SHOW = {"changes": "Decisions and changes", "retrievals": "Retrievals", "all": "Everything"}


class HistoryFilterForm(PagedFilterForm):
    field_order = ["actor", "action", "since", "until"]

    actor = forms.CharField(
        required=False, max_length=200, help_text="user:<name>, agent:<slug> or system:…", label="Actor"
    )
    action = forms.CharField(
        required=False,
        max_length=64,
        label="Action",
        widget=forms.TextInput(attrs={"list": "audit-actions"}),
        help_text="An action (fact.withdrawn), a family (fact) or retrieval.",
    )
    principal = forms.CharField(required=False, max_length=200, label="Principal (external id)")
    fact = forms.IntegerField(required=False, min_value=1, label="Fact id")
    project = forms.ChoiceField(required=False, label="Project")
    # Which traffic to list: decisions and other changes, retrievals, or both.
    show = forms.ChoiceField(required=False, choices=[(v, v) for v in SHOW], widget=forms.HiddenInput)

    def __init__(self, *args: Any, projects: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Form.fields is typed as Field in the stubs; this one is a ChoiceField.
        self.fields["project"].choices = [("", "all"), *((slug, slug) for slug in projects)]  # type: ignore[attr-defined]

    def decode_cursor(self, value: str) -> selectors.Cursor:
        return selectors.decode_cursor(value)

    def filters(self, *, default_show: str = "all") -> selectors.HistoryFilters:
        data = self.cleaned_data
        return selectors.HistoryFilters(
            show=data.get("show") or default_show,
            actor=data["actor"].strip() or None,
            action=data["action"].strip() or None,
            since=data["since"],
            until=data["until"],
            principal=data["principal"].strip() or None,
            fact=data["fact"],
            project=data["project"] or None,
        )


def _with_query(url: str, params: dict[str, Any]) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{url}?{query}" if query else url


def _form(request: HttpRequest) -> HistoryFilterForm:
    slugs = list(access.projects_of(request.user).order_by("slug").values_list("slug", flat=True))
    return HistoryFilterForm(request.GET, projects=slugs)


@console_view()
@replica_reads
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    form = _form(request)
    page = selectors.HistoryPage([], None)
    # The page opens on decisions and changes; retrievals have their own tab. An action or
    # fact filter already says what to list, so it shows everything it matches.
    narrowed = request.GET.get("action") or request.GET.get("fact")
    asked = request.GET.get("show", "")
    show = asked if asked in SHOW else ("all" if narrowed else "changes")
    if form.is_valid():
        page = selectors.history_page(
            access.projects_of(request.user),
            form.filters(default_show=show),
            after=form.cleaned_data["cursor"],
            limit=PAGE_SIZE,
        )
    base = reverse("audit:history")
    # Pager and export links keep the filters as sent; a new filter submission carries no cursor.
    params: dict[str, Any] = {k: v for k, v in request.GET.items() if k != "cursor"}
    params["show"] = show
    projects = list(access.projects_of(request.user).order_by("slug").values_list("slug", flat=True))
    context = {
        "form": form,
        "show": show,
        "tabs": [(value, text, _with_query(base, {**params, "show": value})) for value, text in SHOW.items()],
        "verify_projects": projects,
        "items": page.items,
        "known_actions": (*selectors.ACTION_FAMILIES, *selectors.KNOWN_ACTIONS),
        "several_projects": len({item.project for item in page.items}) > 1,
        "older_url": _with_query(base, {**params, "cursor": page.next_cursor}) if page.next_cursor else None,
        "newest_url": _with_query(base, params) if request.GET.get("cursor") else None,
        "export_csv_url": _with_query(reverse("audit:export"), {**params, "format": "csv"}),
        "export_jsonl_url": _with_query(reverse("audit:export"), {**params, "format": "jsonl"}),
    }
    return page_or_fragment(request, "governance/audit/history.html", "history_results", context)


@console_view()
@replica_reads
@require_GET
def fact_timeline(request: HttpRequest, fact_id: int) -> HttpResponse:
    fact = get_scoped(
        request, Fact.objects.defer("embedding").select_related("project", "principal"), pk=fact_id
    )
    timeline = fact_selectors.fact_timeline(fact)
    return render(
        request,
        "governance/audit/fact_timeline.html",
        {
            "fact": fact,
            "timeline": timeline,
            "history_url": _with_query(reverse("audit:history"), {"fact": fact.pk}),
            "export_url": _with_query(reverse("audit:export"), {"fact": fact.pk, "format": "csv"}),
        },
    )


# console_view's view type names HttpResponse; Django serves a streamed response all the same.
@console_view()
@replica_reads  # type: ignore[arg-type]
@require_GET
def export(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    fmt = request.GET.get("format", "csv")
    if fmt not in FORMATS:
        return HttpResponseBadRequest(
            f"format must be one of: {', '.join(FORMATS)}.", content_type="text/plain"
        )
    form = _form(request)
    if not form.is_valid():
        return HttpResponseBadRequest(
            "Invalid filters: " + "; ".join(f"{k}: {v[0]}" for k, v in form.errors.items()),
            content_type="text/plain",
        )
    return export_response(access.projects_of(request.user), form.filters(), fmt)


@require_POST
@console_view(write_roles=access.READ_ROLES)
def verify(request: HttpRequest) -> HttpResponse:
    """Queue "verify chain" for one project (any role there may ask; it changes nothing)."""
    slug = request.POST.get("project", "")
    project = access.projects_of(request.user).filter(slug=slug).first()
    if project is None:
        # Not one of the user's projects (or not a project at all): nothing to verify, nothing said about it.
        return render(
            request,
            "governance/audit/history.html#verify_result",
            {"verify_error": "Choose one of your projects to verify."},
            status=400,
        )
    check(request, project)
    job = verification_service.start_verification(project, user=request.user)
    if not is_htmx(request):
        return redirect("audit:verification", verification_id=job.pk)
    return _verification(request, job)


@console_view()
@require_GET
def verification(request: HttpRequest, verification_id: str) -> HttpResponse:
    job = get_scoped(
        request,
        Job.objects.filter(kind=verification_service.JOB_KIND).select_related("project"),
        pk=verification_id,
    )
    return _verification(request, job)


def _verification(request: HttpRequest, job: Job) -> HttpResponse:
    return page_or_fragment(request, "governance/audit/verification.html", "verify_result", {"job": job})
