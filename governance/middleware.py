"""Attach actor and request context to every history row written in a request."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pghistory
from django.http import HttpRequest, HttpResponse

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
