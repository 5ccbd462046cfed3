"""Request-wide concerns: actor context for history rows; no caching of private pages."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pghistory
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers, patch_cache_control

from governance import context


class AuditContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        user = getattr(request, "user", None)
        actor = f"user:{user.get_username()}" if user is not None and user.is_authenticated else "anonymous"
        # API views replace the actor once they authenticate the bearer secret.
        with (
            context.actor_scope(actor, request_id=request_id, user=user if actor != "anonymous" else None),
            pghistory.context(request_id=request_id, url=request.path, method=request.method, actor=actor),
        ):
            response = self.get_response(request)
        response["X-Request-Id"] = request_id
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
