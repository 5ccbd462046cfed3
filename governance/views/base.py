"""Shared console view helpers: login, role checks in the object's project, scoping.

Every console view is login-only and needs a membership somewhere. A view
resolves the object it acts on through ``get_checked`` (or calls ``check``
with a project): outside the user's projects that is a 404, and a role that
does not allow the action in that project is a 403 (``governance.access``).
A state-changing view that answers success without having checked a role is
a programming error: ``console_view`` turns it into a server error. That is
detection, not prevention (the change is already made), which is why the
access matrix test posts to every URL with the wrong role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any, TypeVar, cast

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.cache import patch_vary_headers
from django_htmx.middleware import HtmxDetails

from governance import access
from governance.models import Project
from governance.selectors.cursors import InvalidCursor
from memoryadmin import routers

M = TypeVar("M", bound=Model)
# datetime-local inputs send and expect this shape; the forms also accept full ISO 8601.
LOCAL_DATETIME = "%Y-%m-%dT%H:%M"
View = Callable[..., HttpResponse]
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
NO_PROJECT_MESSAGE = "You are not a member of any project yet. Ask a project administrator to add you."
# Request attributes set by console_view (Django requests take arbitrary attributes).
_NEEDED = "_governance_needed_roles"
_CHECKED = "_governance_role_checked"


def console_view(*, write_roles: frozenset[str] | None = None) -> Callable[[View], View]:
    """Login and a membership required; GET/HEAD need any role in the object's project,
    other methods need ``write_roles`` there (the view checks it with ``get_checked``/``check``)."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            safe = request.method in SAFE_METHODS
            if not safe and write_roles is None:
                return HttpResponseNotAllowed(["GET", "HEAD"])
            if not access.memberships(request.user):
                access.log_denied(request.user, f"{request.method} {request.path}", view.__name__)
                raise PermissionDenied(NO_PROJECT_MESSAGE)
            setattr(request, _NEEDED, access.READ_ROLES if safe else write_roles)
            response = view(request, *args, **kwargs)
            if not safe and response.status_code < 400 and not getattr(request, _CHECKED, False):
                raise ImproperlyConfigured(f"{view.__name__} changed state without checking a role.")
            return response

        return wrapper

    return decorate


def replica_reads(view: View) -> View:
    """A page that only reads may be served from the read replica (memoryadmin.routers).

    Only GET and HEAD, and not for a person who changed something in the last
    few seconds (they must see their change). If the replica fails while the
    page is built, the page is built again from the primary: it only reads, so
    running it twice changes nothing. A streamed response reads from the same
    place while it streams; a failure half-way through a download cannot be
    retried and ends the download.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return view(request, *args, **kwargs)
        if routers.WROTE_COOKIE in request.COOKIES:
            with routers.reading_from_primary():
                return view(request, *args, **kwargs)
        with routers.reading_from_replica() as read:
            if not read.from_replica:
                return view(request, *args, **kwargs)
            try:
                response = view(request, *args, **kwargs)
            except routers.ERRORS as exc:
                if routers.replica_usable():
                    raise  # the replica is fine: the error is the page's own
                routers.mark_down(exc)
                read = routers.ReplicaRead(routers.PRIMARY)
        if not read.from_replica:
            with routers.reading_from_primary():
                return view(request, *args, **kwargs)
        response[routers.READ_FROM_HEADER] = read.header()
        if isinstance(response, StreamingHttpResponse) and not response.is_async:
            response.streaming_content = _reading_from(read, response.streaming_content)
        return response

    return wrapper


def _reading_from(read: routers.ReplicaRead, chunks: Iterable[Any]) -> Any:
    with routers.reading_from_replica(read):
        yield from chunks


def check(request: HttpRequest, project: Project | int, roles: Iterable[str] | None = None) -> str:
    """The user's role in ``project``: 404 when not a member, 403 when it does not allow
    ``roles`` (by default what the view declared for this method)."""
    needed = roles if roles is not None else getattr(request, _NEEDED, access.READ_ROLES)
    role = access.require_role(request.user, project, needed, action=f"{request.method} {request.path}")
    checked(request)
    return role


def checked(request: HttpRequest) -> None:
    """Record that a view checked access itself (an action not tied to one project)."""
    setattr(request, _CHECKED, True)


def project_id_of(obj: Model, project_field: str = "project") -> int:
    """Follow ``project_field`` ("project", "agent__project", "pk" for a project) to the project id."""
    *path, last = project_field.split("__")
    target: Any = obj
    for name in path:
        target = getattr(target, name)
    return int(target.pk if last == "pk" else getattr(target, f"{last}_id"))


def scoped(request: HttpRequest, queryset: QuerySet[M], project_field: str = "project") -> QuerySet[M]:
    """Only rows of the projects the user belongs to (R1 for people)."""
    return queryset.filter(
        **{f"{project_field}__in": access.project_ids_with_role(request.user, access.READ_ROLES)}
    )


def scoped_with_role(
    request: HttpRequest, queryset: QuerySet[M], roles: Iterable[str], project_field: str = "project"
) -> QuerySet[M]:
    """Only rows of the projects where the user's role allows ``roles`` (bulk actions, listings)."""
    return queryset.filter(**{f"{project_field}__in": access.project_ids_with_role(request.user, roles)})


def get_checked(
    request: HttpRequest,
    queryset: QuerySet[M],
    project_field: str = "project",
    roles: Iterable[str] | None = None,
    **lookup: Any,
) -> M:
    """The object, if the user's role in its project allows the view's action (else 404 / 403)."""
    obj = get_object_or_404(scoped(request, queryset, project_field), **lookup)
    check(request, project_id_of(obj, project_field), roles)
    return obj


def get_scoped(
    request: HttpRequest, queryset: QuerySet[M], project_field: str = "project", **lookup: Any
) -> M:
    """Read access only (any role in the object's project); does not count as a role check
    for a state-changing view, which uses ``get_checked``."""
    return get_object_or_404(scoped(request, queryset, project_field), **lookup)


def datetime_local_field(label: str) -> forms.DateTimeField:
    """An optional period bound rendered as the browser's datetime-local picker."""
    return forms.DateTimeField(
        label=label,
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_DATETIME),
    )


class PagedFilterForm(forms.Form):
    """A keyset-paged listing's filters: a period, and the hidden cursor of the page shown.
    A subclass adds its fields (placing the period with ``field_order``), names what it
    lists, and says how its cursor is read back."""

    since = datetime_local_field("Since")
    until = datetime_local_field("Until")
    cursor = forms.CharField(required=False, widget=forms.HiddenInput)
    # For the message on a stale page link: "start again from the newest <listing>".
    listing = "entries"

    def decode_cursor(self, value: str) -> Any:
        raise NotImplementedError

    def clean_cursor(self) -> Any:
        value = self.cleaned_data.get("cursor")
        if not value:
            return None
        try:
            return self.decode_cursor(value)
        except InvalidCursor as exc:
            raise ValidationError(
                f"This page link is not valid; start again from the newest {self.listing}."
            ) from exc

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since >= until:
            self.add_error("until", "The period must end after it starts.")
        return data


def add_service_error(form: forms.Form, field: str | None, message: str) -> None:
    """A service's refusal shown under the field it names, or above the form when the
    form has no such field (or the refusal names none)."""
    form.add_error(field if field in form.fields else None, message)


# --- htmx --------------------------------------------------------------------


class HtmxHttpRequest(HttpRequest):
    """What django-htmx's middleware adds, for the type checker."""

    htmx: HtmxDetails


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent the request (django-htmx's middleware sets ``request.htmx`` on every one)."""
    return bool(cast(HtmxHttpRequest, request).htmx)


def page_or_fragment(
    request: HttpRequest, template: str, fragment: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """The whole page, or for htmx only ``fragment`` of the same template; a history
    restore wants the whole page. The answer varies on HX-Request so no cache mixes them."""
    htmx = cast(HtmxHttpRequest, request).htmx
    if htmx and not htmx.history_restore_request:
        template += f"#{fragment}"
    response = render(request, template, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def reload_page() -> HttpResponse:
    """The answer to a progress poll whose work is over: no content, and htmx reloads
    the whole page (the finished result replaces the progress box)."""
    response = HttpResponse(status=204)
    response["HX-Refresh"] = "true"
    return response
