"""The change feed in the console: webhooks (project admins) and their delivery log.

Everyone with a role in a project sees its webhooks and deliveries (auditors
included: where governance events went is part of the trail); only admins add or
disable a webhook. A new webhook's signing secret is shown once, in the response
to the POST that made it, with ``Cache-Control: no-store``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST

from governance import access
from governance.models import FeedDelivery, Project, WebhookEndpoint
from governance.rules.feed import EVENT_LABELS, EVENT_TYPES
from governance.services import feed as feed_service
from governance.views.base import check, checked, console_view, get_checked, scoped

LOG_ROWS = 100


class WebhookForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.none(), empty_label=None)
    url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="Receiver address",
        help_text="Where each event is sent as signed JSON (https recommended).",
    )
    event_types = forms.MultipleChoiceField(
        choices=[(code, f"{EVENT_LABELS[code]}: {meaning}") for code, meaning in EVENT_TYPES.items()],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Events to send",
        help_text="None ticked sends every kind of event.",
    )
    description = forms.CharField(required=False, max_length=200, label="What receives it")

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["project"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = projects


class DisableForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True)


def _admin_projects(request: HttpRequest) -> Any:
    ids = access.project_ids_with_role(request.user, access.ADMIN_ROLES)
    return Project.objects.filter(pk__in=ids, archived_at__isnull=True).order_by("slug")


def _page(
    request: HttpRequest,
    *,
    form: WebhookForm | None = None,
    new_secret: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    admin_projects = _admin_projects(request)
    endpoints = list(
        scoped(request, WebhookEndpoint.objects.select_related("project")).order_by(
            "disabled_at", "project__slug", "pk"
        )
    )
    deliveries = list(
        scoped(
            request, FeedDelivery.objects.select_related("event", "endpoint__project"), "endpoint__project"
        ).order_by("-pk")[:LOG_ROWS]
    )
    # Display-only attributes for the template, which the models do not declare.
    for endpoint in endpoints:
        endpoint.event_labels = [EVENT_LABELS.get(t, t) for t in endpoint.event_types]  # type: ignore[attr-defined]
    for delivery in deliveries:
        delivery.event_label = EVENT_LABELS.get(delivery.event.event_type, "Event")  # type: ignore[attr-defined]
    response = render(
        request,
        "governance/feed/page.html",
        {
            "endpoints": endpoints,
            "deliveries": deliveries,
            "admin_project_ids": set(admin_projects.values_list("pk", flat=True)),
            "form": form or (WebhookForm(projects=admin_projects) if admin_projects.exists() else None),
            "new_secret": new_secret,
            "log_rows": LOG_ROWS,
        },
        status=status,
    )
    if new_secret:
        add_never_cache_headers(response)
    return response


@console_view()
def feed_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@console_view(write_roles=access.ADMIN_ROLES)
def webhook_create(request: HttpRequest) -> HttpResponse:
    projects = _admin_projects(request)
    if not projects.exists():
        access.log_denied(request.user, f"{request.method} {request.path}", "webhook_create")
        raise PermissionDenied("Only a project's administrators can add a webhook.")
    form = WebhookForm(request.POST, projects=projects)
    if not form.is_valid():
        checked(request)  # an admin somewhere; the form names what to fix
        return _page(request, form=form, status=400)
    project = form.cleaned_data["project"]
    check(request, project)
    endpoint, secret = feed_service.create_endpoint(
        project,
        form.cleaned_data["url"],
        event_types=form.cleaned_data["event_types"],
        description=form.cleaned_data["description"],
        user=request.user,
    )
    return _page(request, new_secret={"secret": secret, "url": endpoint.url}, status=201)


@require_POST
@console_view(write_roles=access.ADMIN_ROLES)
def webhook_disable(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = get_checked(request, WebhookEndpoint.objects.select_related("project"), pk=endpoint_id)
    form = DisableForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400)
    feed_service.disable_endpoint(endpoint, user=request.user, reason=form.cleaned_data["reason"])
    return HttpResponseRedirect(reverse("feed:page"))
