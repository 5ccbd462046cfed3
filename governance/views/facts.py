"""The console's fact page: provenance, timelines, history, and a reviewer's actions on one fact."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from governance import access
from governance.models import Fact
from governance.models.facts import FactKind, FactStatus, SourceType
from governance.selectors import facts as fact_selectors
from governance.services import facts as fact_service
from governance.views.base import console_view, get_checked, is_htmx, replica_reads
from governance.views.lists import PAGE_SIZE, ListForm, choices, render_list

TEMPLATE = "governance/facts/detail.html"
REASON_REQUIRED = "Give a reason: it goes into the audit trail."


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True, error_messages={"required": REASON_REQUIRED})


class WithdrawForm(ReasonForm):
    pass


class VerifyForm(ReasonForm):
    pass


class AuthorityForm(ReasonForm):
    authority = forms.TypedChoiceField(choices=[(n, str(n)) for n in range(1, 6)], coerce=int)


FORMS: dict[str, type[ReasonForm]] = {
    "withdraw": WithdrawForm,
    "verify": VerifyForm,
    "authority": AuthorityForm,
}


class FactFilterForm(ListForm):
    principal = forms.CharField(required=False, max_length=200, label="Person (their id)")
    status = forms.ChoiceField(required=False, choices=choices("status", list(FactStatus.values)))
    kind = forms.ChoiceField(required=False, choices=choices("kind", list(FactKind.values)))
    source = forms.ChoiceField(
        required=False, choices=choices("source", list(SourceType.values)), label="Source"
    )
    text_label = "Statement has"
    field_order = ["project", "q", "principal", "status", "kind", "source"]


@console_view()
@replica_reads
def index(request: HttpRequest) -> HttpResponse:
    form = FactFilterForm.for_request(request)
    page = None
    if form.is_valid():
        data = form.cleaned_data
        filters = fact_selectors.FactFilters(
            project=form.project_id(),
            principal=data["principal"].strip() or None,
            status=data["status"] or None,
            kind=data["kind"] or None,
            source_type=data["source"] or None,
            text=form.text(),
        )
        page = fact_selectors.fact_list(form.project_ids(), filters, cursor=data["cursor"], limit=PAGE_SIZE)
    return render_list(
        request, "governance/facts/index.html", reverse("facts:index"), form, page, rows="facts"
    )


def _facts(request: HttpRequest, fact_id: int) -> Fact:
    # The fact's project first: another project's fact id answers 404, not 403 (R1);
    # then the role there: reading needs any role, acting needs the reviewer's.
    return get_checked(
        request,
        Fact.objects.select_related(
            "project", "principal", "agent", "session", "derived_from_retrieval"
        ).defer("embedding"),
        pk=fact_id,
    )


def _render(
    request: HttpRequest,
    fact: Fact,
    *,
    bound: dict[str, ReasonForm] | None = None,
    notice: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    forms_by_name: dict[str, Any] = {name: form_class() for name, form_class in FORMS.items()}
    forms_by_name.update(bound or {})
    forms_by_name["authority"].initial.setdefault("authority", fact.authority)
    context = {
        "page": fact_selectors.fact_page(fact),
        "fact": fact,
        "forms": forms_by_name,
        "can_act": access.has_role(request.user, fact.project_id, access.REVIEW_ROLES),
        "kept_for_review": list(fact_selectors.kept_for_review(fact).values_list("pk", flat=True)),
        "notice": notice,
        "error": error,
    }
    # htmx swaps only the panel that holds the page's state; the page around it is unchanged.
    template = f"{TEMPLATE}#fact" if is_htmx(request) else TEMPLATE
    return render(request, template, context, status=status)


@console_view()
@replica_reads
def detail(request: HttpRequest, fact_id: int) -> HttpResponse:
    return _render(request, _facts(request, fact_id))


def _act(request: HttpRequest, fact_id: int, name: str) -> HttpResponse:
    fact = _facts(request, fact_id)
    form = FORMS[name](request.POST)
    if form.is_valid():
        reason = form.cleaned_data["reason"]
        try:
            if name == "withdraw":
                was_withdrawn = fact.status == "withdrawn"
                fact_service.withdraw_fact(
                    fact, reason=reason, actor=f"user:{request.user.get_username()}", user=request.user
                )
                done = (
                    f"The copies of fact {fact.pk} that were kept for review are erased."
                    if was_withdrawn
                    else f"Fact {fact.pk} withdrawn: its statement is erased from it and from every copy "
                    "about the same person; a tombstone blocks learning it again."
                )
            elif name == "verify":
                fact_service.verify_fact(fact, user=request.user, reason=reason)
                done = f"Fact {fact.pk} marked verified."
            else:
                authority = form.cleaned_data["authority"]
                fact_service.change_authority(fact, authority=authority, user=request.user, reason=reason)
                done = f"Fact {fact.pk} now has authority {authority}."
        except fact_service.FactStateError as exc:
            # The fact moved on (someone withdrew or replaced it): say so above the actions.
            return _render(request, fact, error=str(exc), status=409)
        else:
            if is_htmx(request):
                return _render(request, _facts(request, fact_id), notice=done)
            messages.success(request, done)
            # Post/redirect/get, so a reload does not repeat the action; pages
            # that offer these actions inline (the principal page) name
            # themselves in ``next``.
            back = request.POST.get("next", "")
            if back and url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
                return redirect(back)
            return redirect("facts:detail", fact_id=fact.pk)
    return _render(request, fact, bound={name: form}, status=400)


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def withdraw(request: HttpRequest, fact_id: int) -> HttpResponse:
    return _act(request, fact_id, "withdraw")


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def verify(request: HttpRequest, fact_id: int) -> HttpResponse:
    return _act(request, fact_id, "verify")


@require_POST
@console_view(write_roles=access.REVIEW_ROLES)
def authority(request: HttpRequest, fact_id: int) -> HttpResponse:
    return _act(request, fact_id, "authority")
