"""The console's review queue: pending and quarantined writes, decided one by one or in bulk.

One template gives the page and its fragments (django-template-partials):
when htmx asks, a decision answers with the decided item and the counts
(out of band), so the queue updates in place; without JavaScript the same
forms post normally and the view redirects back to the queue.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from governance import access
from governance.models import Project, Write
from governance.rules import labels
from governance.selectors import queue_health as queue_health_selectors
from governance.selectors import reviews as review_selectors
from governance.selectors.cursors import InvalidCursor
from governance.services import reviews as review_service
from governance.views import charts
from governance.views.base import (
    add_service_error,
    check,
    console_view,
    get_checked,
    is_htmx,
    scoped_with_role,
)

TEMPLATE = "governance/reviews/queue.html"
REASON_REQUIRED = "Give a reason for this decision: it goes into the audit trail."
STATUS_TABS = (("", "All"), ("pending_review", "Pending review"), ("quarantined", "Quarantined"))


class DecisionForm(forms.Form):
    action = forms.ChoiceField(
        choices=[
            ("approve", "Approve"),
            ("reject", "Reject"),
            ("edit_approve", "Approve with edits"),
            ("keep_both", "Keep both"),
        ],
        error_messages={"required": "Choose approve or reject."},
    )
    reason = forms.CharField(max_length=2000, strip=True, error_messages={"required": REASON_REQUIRED})
    statement = forms.CharField(required=False, strip=True, max_length=4000)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "edit_approve" and not data.get("statement"):
            self.add_error("statement", "Write the statement you want to approve.")
        return data

    def decision(self) -> review_service.Decision:
        data = self.cleaned_data
        # The statement box holds the text to approve: whichever approve button
        # (or the keyboard) sends the form, an edit in it is what becomes memory.
        # The service records a plain approval when the text is unchanged.
        if data["action"] in ("approve", "edit_approve") and data.get("statement"):
            # Browsers send textarea line breaks as CRLF; an unchanged edit must compare equal.
            return review_service.Decision(
                "approve", data["reason"], statement=data["statement"].replace("\r\n", "\n")
            )
        return review_service.Decision(data["action"], data["reason"])


class BulkDecisionForm(forms.Form):
    write = forms.ModelMultipleChoiceField(
        queryset=Write.objects.none(),
        error_messages={
            "required": "Select at least one write.",
            "invalid_choice": "Write %(value)s is not in your queue.",
        },
    )
    action = forms.ChoiceField(
        choices=[("approve", "Approve"), ("reject", "Reject")],
        error_messages={"required": "Choose approve or reject."},
    )
    reason = forms.CharField(max_length=2000, strip=True, error_messages={"required": REASON_REQUIRED})

    def __init__(self, *args: Any, writes: QuerySet[Write], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Ids outside the user's projects are invalid choices (nothing is decided), never a leak.
        # (Form.fields is typed as Field in the stubs; this one is a ModelMultipleChoiceField.)
        self.fields["write"].queryset = writes  # type: ignore[attr-defined]


_ANY = ("", "Any")


class QueueFilterForm(forms.Form):
    """The queue's filters, read from the URL so a filtered queue can be shared and reloaded."""

    project = forms.ChoiceField(required=False)
    agent = forms.ChoiceField(required=False)
    kind = forms.ChoiceField(required=False, choices=[_ANY, *((k, v.text) for k, v in labels.KINDS.items())])
    finding = forms.ChoiceField(
        required=False, choices=[_ANY, *((k, v.text) for k, v in labels.FINDINGS.items())]
    )
    source = forms.ChoiceField(
        required=False,
        label="Source",
        choices=[_ANY, *((k, v.text) for k, v in labels.SOURCE_TYPES.items())],
    )

    def __init__(self, *args: Any, choices: review_selectors.QueueFilterChoices, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Form.fields is typed as Field in the stubs; these two are ChoiceFields.
        self.fields["project"].choices = [_ANY, *((p, p) for p in choices.projects)]  # type: ignore[attr-defined]
        self.fields["agent"].choices = [_ANY, *((a, a) for a in choices.agents)]  # type: ignore[attr-defined]

    def filters(self) -> review_selectors.QueueFilters:
        # An unknown value (a stale link) is dropped rather than failing the page.
        self.is_valid()
        data = self.cleaned_data
        return review_selectors.QueueFilters(**{name: data.get(name) or "" for name in self.fields})


def _filter_form(request: HttpRequest) -> QueueFilterForm:
    projects = access.projects_of(request.user)
    return QueueFilterForm(request.GET, choices=review_selectors.queue_filter_choices(projects))


def _filter_query(filters: review_selectors.QueueFilters) -> str:
    """The filters as a query string (``&``-joined, no leading ``?``) for every link and form."""
    return urlencode({name: value for name, value in vars(filters).items() if value})


def _status(request: HttpRequest) -> str:
    value = request.GET.get("status", "")
    return value if value in review_selectors.QUEUE_STATUSES else ""


def _queue_url(status: str, request: HttpRequest | None = None) -> str:
    """Back to the queue as the reviewer had it: the same tab and the same filters."""
    params = {"status": status} if status else {}
    if request is not None:
        params.update({k: str(v) for k, v in request.GET.items() if k in QueueFilterForm.base_fields and v})
    url = reverse("reviews:queue")
    return f"{url}?{urlencode(params)}" if params else url


def _counts(request: HttpRequest) -> dict[str, int]:
    return review_selectors.queue_counts(access.projects_of(request.user))


def _queue_context(
    request: HttpRequest,
    *,
    status: str,
    errors: dict[int, DecisionForm] | None = None,
    extra_writes: list[Write] | None = None,
    bulk_form: BulkDecisionForm | None = None,
    notices: list[str] | None = None,
) -> dict[str, Any]:
    projects = access.projects_of(request.user)
    after = None
    cursor = request.GET.get("cursor", "")
    if cursor:
        try:
            after = review_selectors.QueueCursor.decode(cursor)
        except InvalidCursor:
            # A stale or hand-edited link: show the first page rather than an error.
            cursor = ""
    filter_form = _filter_form(request)
    filters = filter_form.filters()
    page = review_selectors.review_queue(projects, status=status or None, after=after, filters=filters)
    writes = page.writes
    shown = {w.pk for w in writes}
    # A write whose form failed is shown even when it sits on another page.
    writes = [w for w in (extra_writes or []) if w.pk not in shown] + writes
    # The similar facts come in a second request (the ``similar`` view), asked
    # by the page as it loads: they cost more than the rest of the page.
    items = review_selectors.review_items(writes, with_similar=False)
    for item in items:
        item.form = (errors or {}).get(item.write.pk)
        item.can_decide = access.has_role(request.user, item.write.project_id, access.REVIEW_ROLES)
    # Keep the reviewer's selection only when the bulk form comes back with errors.
    selected = set(request.POST.getlist("write")) if bulk_form is not None else set()
    return {
        "items": items,
        "counts": review_selectors.queue_counts(projects, filters),
        "status": status,
        "filter_form": filter_form,
        "health": [h for h in queue_health_selectors.queue_health(projects) if h.oldest_waiting_at],
        "filter_query": _filter_query(filters),
        # The tab and filters for the decision forms' URLs, so a post comes back to the same queue.
        "queue_query": "&".join(
            q for q in (urlencode({"status": status}) if status else "", _filter_query(filters)) if q
        ),
        "filtered": any(vars(filters).values()),
        "status_tabs": STATUS_TABS,
        "cursor": cursor,
        "next_cursor": page.next.encode() if page.next else "",
        "bulk_form": bulk_form,
        "selected": selected,
        "notices": notices or [],
        "can_decide_any": any(item.can_decide for item in items),
        "similar_query": _similar_query([item.write.pk for item in items]),
    }


def _similar_query(write_ids: list[int]) -> str:
    return urlencode([("write", pk) for pk in write_ids])


def _fragments(
    request: HttpRequest, parts: list[tuple[str, dict[str, Any]]], status: int = 200
) -> HttpResponse:
    html = "".join(
        render_to_string(f"{TEMPLATE}#{name}", context, request=request) for name, context in parts
    )
    return HttpResponse(html, status=status)


@console_view()
def queue(request: HttpRequest) -> HttpResponse:
    context = _queue_context(request, status=_status(request))
    if is_htmx(request):
        return _fragments(request, [("queue", context), ("counts", {**context, "oob": True})])
    context["findings_chart"] = _findings_chart(access.projects_of(request.user))
    return render(request, TEMPLATE, context)


# More ids than a page shows are not looked up (a hand-made URL cannot ask for the whole queue).
SIMILAR_MAX_WRITES = review_selectors.PAGE_SIZE + 1


@console_view()
def similar(request: HttpRequest) -> HttpResponse:
    """The similar facts of the queue's writes, each in its own box on the page.

    The queue asks for this once it is on screen (htmx, ``hx-swap="none"``):
    every box is swapped in out of band by its id, so nothing else on the
    page, least of all a decision form being filled in, is replaced. Without
    JavaScript the queue links here and this answers as a page of its own.
    """
    ids = [int(v) for v in request.GET.getlist("write") if v.isascii() and v.isdigit() and len(v) <= 18]
    writes = review_selectors.waiting_writes(access.projects_of(request.user), ids[:SIMILAR_MAX_WRITES])
    found = review_selectors.similar_facts(writes) if writes else {}
    boxes = [{"write": w, "similar": found.get(w.pk, []), "loaded": True} for w in writes]
    if is_htmx(request):
        return _fragments(request, [("similar", {**box, "oob": True}) for box in boxes])
    return render(request, "governance/reviews/similar.html", {"boxes": boxes})


def _findings_chart(projects: QuerySet[Project]) -> charts.StackedChart:
    over_time = queue_health_selectors.findings_over_time(projects)
    return charts.stacked_bars(
        f"Writes held for review per day in the last {len(over_time.days)} days, by finding",
        [day.strftime("%Y-%m-%d") for day in over_time.days],
        {
            ("Other findings" if check == "other" else labels.label_for("finding", check).text): counts
            for check, counts in over_time.counts.items()
        },
    )


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def decide(request: HttpRequest, write_id: int) -> HttpResponse:
    # The write's project first: another project's write id is a 404 whatever the form
    # says (R1); a role there that may not review is a 403.
    write = get_checked(request, Write.objects.all(), pk=write_id)
    status = _status(request)
    form = DecisionForm(request.POST)
    if form.is_valid():
        try:
            review_service.decide(write.pk, form.decision(), reviewer=request.user)
        except review_service.AlreadyDecided:
            return _already_decided(request, write.pk, status)
        except review_service.Tombstoned as exc:
            # Shown above the item's buttons; the write stays in the queue to be rejected.
            form.add_error(None, str(exc))
            return _invalid(request, write, form, status, code=409)
        except review_service.InvalidDecision as exc:
            add_service_error(form, exc.field, str(exc))
        else:
            return _decided(request, write.pk, status)
    return _invalid(request, write, form, status)


def _decided(request: HttpRequest, write_id: int, status: str) -> HttpResponse:
    info = review_selectors.decided_info(write_id)
    if is_htmx(request):
        query = request.META.get("QUERY_STRING", "")
        decided = {
            "info": info,
            "queue_query": query,
            # The undo button lasts as long as the service allows it (REVIEW_UNDO_SECONDS).
            "undo_seconds": settings.REVIEW_UNDO_SECONDS,
        }
        return _fragments(
            request,
            [
                ("decided", decided),
                ("row", {"row_write": info.write, "row_state": info.verb, "oob": True}),
                ("counts", {"counts": _counts(request), "oob": True}),
            ],
        )
    messages.success(request, f"Write {write_id} {info.verb}.")
    return redirect(_queue_url(status, request))


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def undo(request: HttpRequest, write_id: int) -> HttpResponse:
    """Take back a decision within the undo window: the write waits in the queue again."""
    write = get_checked(request, Write.objects.all(), pk=write_id)
    status = _status(request)
    try:
        review_service.undo(write.pk, reviewer=request.user)
    except review_service.UndoRefused as exc:
        if is_htmx(request):
            info = review_selectors.decided_info(write.pk)
            return _fragments(request, [("decided", {"info": info, "undo_error": str(exc)})], status=409)
        messages.error(request, f"Write {write.pk}: {exc}")
        return redirect(_queue_url(status, request))
    if is_htmx(request):
        [item] = review_selectors.review_items([review_selectors.queue_write(write.pk)])
        item.can_decide = True  # the view checked the role
        query = request.META.get("QUERY_STRING", "")
        return _fragments(
            request,
            [
                ("item", {"item": item, "status": status, "queue_query": query, "undone": True}),
                ("row", {"row_write": item.write, "row_item": item, "oob": True}),
                ("counts", {"counts": _counts(request), "oob": True}),
            ],
        )
    messages.success(request, f"Write {write.pk} is back in the queue: your decision was undone.")
    return redirect(_queue_url(status, request))


def _already_decided(request: HttpRequest, write_id: int, status: str) -> HttpResponse:
    info = review_selectors.decided_info(write_id)
    if is_htmx(request):
        parts: list[tuple[str, dict[str, Any]]] = [
            ("already", {"info": info}),
            ("counts", {"counts": _counts(request), "oob": True}),
        ]
        return _fragments(request, parts, status=409)
    context = _queue_context(request, status=status, notices=[f"Write {write_id}: {info.message}"])
    return render(request, TEMPLATE, context, status=409)


def _invalid(
    request: HttpRequest, write: Write, form: DecisionForm, status: str, *, code: int = 400
) -> HttpResponse:
    if is_htmx(request):
        [item] = review_selectors.review_items([review_selectors.queue_write(write.pk)])
        item.form = form
        item.can_decide = True  # the view checked the role before validating the form
        query = request.META.get("QUERY_STRING", "")
        return _fragments(
            request, [("item", {"item": item, "status": status, "queue_query": query})], status=code
        )
    context = _queue_context(
        request, status=status, errors={write.pk: form}, extra_writes=[review_selectors.queue_write(write.pk)]
    )
    return render(request, TEMPLATE, context, status=code)


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def bulk(request: HttpRequest) -> HttpResponse:
    # No project lets this user decide anything: say so rather than "select a write".
    access.require_anywhere(request.user, access.REVIEW_ROLES, action="bulk decision")
    status = _status(request)
    # Only writes of projects where the user may review are valid choices; the
    # ids of any other project are rejected as "not in your queue" (nothing is decided).
    reviewable = scoped_with_role(request, Write.objects.all(), access.REVIEW_ROLES)
    form = BulkDecisionForm(request.POST, writes=reviewable)
    if not form.is_valid():
        context = _queue_context(request, status=status, bulk_form=form)
        if is_htmx(request):
            return _fragments(request, [("queue", context)], status=400)
        return render(request, TEMPLATE, context, status=400)
    action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
    decided: list[int] = []
    notices: list[str] = []
    # One transaction per write: a write another reviewer took meanwhile is
    # reported, and does not undo the decisions on the others.
    for write in sorted(form.cleaned_data["write"], key=lambda w: w.pk):
        check(request, write.project_id)
        try:
            review_service.decide(write.pk, review_service.Decision(action, reason), reviewer=request.user)
        except review_service.AlreadyDecided:
            notices.append(f"Write {write.pk}: {review_selectors.decided_info(write.pk).message}")
        except (review_service.InvalidDecision, review_service.Tombstoned) as exc:
            notices.append(f"Write {write.pk}: {exc}")
        else:
            decided.append(write.pk)
    verb = review_selectors.ACTION_WORDS[action]
    if decided:
        listed = ", ".join(str(pk) for pk in decided)
        notices.insert(0, f"{len(decided)} write{'s' if len(decided) != 1 else ''} {verb}: {listed}.")
    if is_htmx(request):
        context = _queue_context(request, status=status, notices=notices)
        return _fragments(request, [("queue", context), ("counts", {**context, "oob": True})])
    for notice in notices:
        messages.info(request, notice)
    return redirect(_queue_url(status, request))
