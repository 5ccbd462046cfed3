"""Shared console view helpers: role checks and project scoping (issue 6 item 4).

Every console view is login-only; state-changing views also require a role.
Objects are looked up through ``scoped()`` so ids of other projects answer 404.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404

from governance import access

M = TypeVar("M", bound=Model)
# datetime-local inputs send and expect this shape; the forms also accept full ISO 8601.
LOCAL_DATETIME = "%Y-%m-%dT%H:%M"
View = Callable[..., HttpResponse]


def console_view(*, write_roles: frozenset[str] | None = None) -> Callable[[View], View]:
    """Login required; GET/HEAD need any console role, other methods need ``write_roles``."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            safe = request.method in ("GET", "HEAD", "OPTIONS")
            needed: frozenset[str]
            if safe:
                needed = access.READ_ROLES
            elif write_roles is None:
                return HttpResponseNotAllowed(["GET", "HEAD"])
            else:
                needed = write_roles
            if not access.has_any_role(request.user, needed):
                access.log_denied(request.user, f"{request.method} {request.path}", view.__name__)
                raise PermissionDenied("Your role does not allow this.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def scoped(request: HttpRequest, queryset: QuerySet[M], project_field: str = "project") -> QuerySet[M]:
    """Only rows of the projects the user belongs to (R1 for people)."""
    return queryset.filter(**{f"{project_field}__in": access.projects_of(request.user)})


def get_scoped(
    request: HttpRequest, queryset: QuerySet[M], project_field: str = "project", **lookup: Any
) -> M:
    return get_object_or_404(scoped(request, queryset, project_field), **lookup)


def datetime_local_field(label: str) -> forms.DateTimeField:
    """An optional period bound rendered as the browser's datetime-local picker."""
    return forms.DateTimeField(
        label=label,
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_DATETIME),
    )
