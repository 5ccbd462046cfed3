"""Request edges: bounds on API requests, the actor and request id of every history row, the
projects a request's database work may touch, and no caching of private pages."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pghistory
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.cache import add_never_cache_headers, patch_cache_control

from governance import context, rls
from memoryadmin import routers

# A client's X-Request-Id is kept only when it is short and plain; anything
# else (it was copied unchecked into the audit row, and over 64 characters
# was a 500) is replaced with an id of our own.
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# Ids a client chose are recorded as such, so the audit trail never presents
# a client's claim as the server's own correlation id.
CLIENT_REQUEST_ID_PREFIX = "client:"


def request_id_from(header: str | None) -> tuple[str, str]:
    """The id to record and the id to send back for a request's X-Request-Id header."""
    if header and _CLIENT_REQUEST_ID.fullmatch(header):
        return CLIENT_REQUEST_ID_PREFIX + header, header
    generated = uuid.uuid4().hex
    return generated, generated


def is_api_path(path: str) -> bool:
    return path.startswith("/api/")


def api_error(status: int, code: str, message: str) -> JsonResponse:
    """The API's error shape (governance.api.errors), for answers given before DRF runs."""
    return JsonResponse({"error": {"code": code, "message": message, "fields": {}}}, status=status)


class ApiBodyLimitMiddleware:
    """Refuses an oversized API body with 413 JSON before anything reads it.

    Django's own limit answers its HTML 400 page, and only once the body is
    read; API clients get the documented JSON error shape instead.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_path(request.path):
            limit: int = settings.API_MAX_BODY_BYTES
            raw = request.META.get("CONTENT_LENGTH") or "0"
            try:
                length = int(raw)
            except ValueError:
                return api_error(400, "invalid", "The Content-Length header is not a number.")
            if length > limit:
                return api_error(
                    413, "too_large", f"The request body is {length:,} bytes; the limit is {limit:,} bytes."
                )
        return self.get_response(request)


class AuditContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id, echoed = request_id_from(request.headers.get("X-Request-Id"))
        user = getattr(request, "user", None)
        actor = f"user:{user.get_username()}" if user is not None and user.is_authenticated else "anonymous"
        # API views replace the actor once they authenticate the bearer secret.
        with (
            context.actor_scope(actor, request_id=request_id, user=user if actor != "anonymous" else None),
            pghistory.context(request_id=request_id, url=request.path, method=request.method, actor=actor),
        ):
            response = self.get_response(request)
        response["X-Request-Id"] = echoed
        return response


class PrivatePagesMiddleware:
    """Nothing a signed-in person sees is kept by a browser or a shared cache.

    Console pages show memory about people and the audit trail; the browser's
    back/forward cache, its disk cache and any proxy would otherwise keep a copy
    after logout. Requests with a bearer secret (the governance and agent APIs)
    are treated the same way. Static files are left cacheable.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        signed_in = user is not None and user.is_authenticated
        if (signed_in or "HTTP_AUTHORIZATION" in request.META) and not request.path.startswith(
            f"/{settings.STATIC_URL.lstrip('/')}"
        ):
            add_never_cache_headers(response)
            patch_cache_control(response, private=True, no_store=True)
        return response


class ProjectScopeMiddleware:
    """Each request's database work is limited to the projects of whoever makes it (governance.rls).

    A signed-in person's projects are their memberships; anyone else starts with
    none, and the API's authentication widens that to the project of an agent
    key or the projects of a personal access token's person. A streamed
    response keeps the scope while it is produced, after this returns.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        signed_in = user is not None and user.is_authenticated
        with rls.scope(rls.for_user(user) if signed_in else rls.NOTHING):
            response = self.get_response(request)
            scope = rls.current()
        if isinstance(response, StreamingHttpResponse) and not response.is_async:
            response.streaming_content = _within(scope, response.streaming_content)
        return response


def _within(scope: rls.ProjectScope, chunks: Iterable[Any]) -> Iterator[Any]:
    with rls.scope(scope):
        yield from chunks


class ReadYourWritesMiddleware:
    """After a person changes something, their pages read from the primary for a while.

    Pages marked for the read replica (``governance.views.base.replica_reads``)
    may be a few seconds behind; the page a POST redirects to must show the
    change. The cookie lasts as long as the replica may lag, so once it expires
    the replica has the change too. Without a replica nothing is set.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if (
            request.method not in ("GET", "HEAD", "OPTIONS")
            and user is not None
            and user.is_authenticated
            and routers.replica_configured()
        ):
            response.set_cookie(
                routers.WROTE_COOKIE,
                "1",
                max_age=max(1, settings.DATABASE_REPLICA_MAX_LAG_SECONDS),
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response
