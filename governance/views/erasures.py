"""Forgetting a person in the console: the dry run and confirmation, then progress and the receipt.

The person's page links here for the roles that may withdraw. The dry run is
the page itself (counts only, nothing changes); confirming with a reason
starts the job and leads to its page, which shows progress while it runs and
the receipt when done: printable as it is, downloadable as JSON, and checked
against the audit chain each time it is shown.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from django import forms
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from governance import access
from governance.models import Job, Principal
from governance.rules import erasure as rules
from governance.selectors import erasures as selectors
from governance.services import erasure as erasure_service
from governance.views.base import check, console_view, is_htmx, reload_page

CONFIRM_TEMPLATE = "governance/erasures/confirm.html"
JOB_TEMPLATE = "governance/erasures/job.html"


class ForgetForm(forms.Form):
    reason = forms.CharField(
        max_length=erasure_service.MAX_REASON,
        strip=True,
        error_messages={
            "required": "Say why this person is being forgotten (for example the request's ticket)."
        },
    )
    confirm = forms.BooleanField(
        error_messages={"required": "Tick the box to confirm: an erasure cannot be undone."},
    )


def _principal(request: HttpRequest, principal_id: int) -> Principal:
    # R1 for people: someone outside the user's projects is a 404, never a 403.
    person = get_object_or_404(
        Principal.objects.select_related("project").filter(project__in=access.projects_of(request.user)),
        pk=principal_id,
    )
    check(request, person.project_id)
    return person


def _confirm_page(
    request: HttpRequest, person: Principal, form: ForgetForm, status: int = 200
) -> HttpResponse:
    found = selectors.inventory(person)
    context = {
        "principal": person,
        "forgotten": rules.is_pseudonym(person.external_id),
        "inventory": found,
        "form": form,
        "can_forget": access.has_role(request.user, person.project, access.REVIEW_ROLES),
        "earlier": Job.objects.filter(
            kind=rules.JOB_KIND, project=person.project, params__principal=person.pk
        )
        .order_by("-created_at")
        .first(),
    }
    return render(request, CONFIRM_TEMPLATE, context, status=status)


@console_view()
def confirm(request: HttpRequest, principal_id: int) -> HttpResponse:
    """The dry run: what forgetting this person would erase, and the form to confirm it."""
    return _confirm_page(request, _principal(request, principal_id), ForgetForm())


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def forget(request: HttpRequest, principal_id: int) -> HttpResponse:
    person = _principal(request, principal_id)
    form = ForgetForm(request.POST)
    if not form.is_valid():
        return _confirm_page(request, person, form, status=400)
    try:
        job = erasure_service.start_erasure(
            person,
            reason=form.cleaned_data["reason"],
            actor=f"user:{request.user.get_username()}",
            user=request.user,
        )
    except erasure_service.ErasureError as exc:
        form.add_error("reason" if exc.field == "reason" else None, str(exc))
        return _confirm_page(request, person, form, status=400)
    return redirect("erasures:job", erasure_id=job.pk)


def _job(request: HttpRequest, erasure_id: UUID) -> Job:
    job = get_object_or_404(selectors.erasure_job(access.projects_of(request.user), erasure_id))
    check(request, job.project_id)
    return job


def _job_context(job: Job) -> dict[str, Any]:
    receipt = (job.result or {}).get("receipt")
    counts = receipt["counts"] if receipt else (job.result or {}).get("counts", rules.empty_counts())
    total = max(job.progress_total, job.progress_done)
    return {
        "job": job,
        "receipt": receipt,
        "rows": rules.labelled(counts),
        "percent": round(100 * job.progress_done / total) if total else 0,
        "problems": selectors.receipt_problems(receipt) if receipt else [],
        "dry_run_total": rules.total_items(job.params.get("dry_run", {})),
        "erased_at": _readable(receipt["erased_at"]) if receipt else "",
        "requested_at": _readable(receipt["requested_at"]) if receipt else "",
    }


def _readable(moment: str | None) -> str:
    """A receipt's ISO time as people read it (the JSON keeps the exact value)."""
    try:
        return datetime.fromisoformat(str(moment)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return str(moment)


@console_view()
def job(request: HttpRequest, erasure_id: UUID) -> HttpResponse:
    """One erasure: live progress while it runs, the receipt once done (same URL)."""
    obj = _job(request, erasure_id)
    if is_htmx(request):
        if obj.is_finished:
            # The poll ends by loading the whole receipt in place of the progress bar.
            return reload_page()
        return HttpResponse(render_to_string(f"{JOB_TEMPLATE}#progress", _job_context(obj), request=request))
    return render(request, JOB_TEMPLATE, _job_context(obj))


@console_view()
def receipt_json(request: HttpRequest, erasure_id: UUID) -> HttpResponse:
    """The receipt as a JSON document to keep, or to check later against the audit chain."""
    obj = _job(request, erasure_id)
    receipt = (obj.result or {}).get("receipt")
    if receipt is None:
        return JsonResponse(
            {"error": {"code": "not_ready", "message": "The erasure has not finished yet.", "fields": {}}},
            status=409,
        )
    response = HttpResponse(
        json.dumps(receipt, indent=2, sort_keys=True) + "\n", content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="erasure-receipt-{obj.pk}.json"'
    return response
