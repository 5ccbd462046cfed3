"""The API's one error shape: {"error": {"code", "message", "fields"}} (docs/api.md, "Errors")."""

from __future__ import annotations

import logging
import sys
from typing import Any

import psycopg
from csp.exceptions import CSPNonceError
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.template import loader
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from governance.middleware import api_error, is_api_path

logger = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "The request conflicts with the current state."


class SourceForbidden(exceptions.PermissionDenied):
    """403 naming what the caller may use instead (``fields`` lists the allowed values)."""

    default_code = "source_not_allowed"

    def __init__(self, message: str, fields: dict[str, list[str]]) -> None:
        super().__init__(message, code=self.default_code)
        self.fields = fields


class TooManyRequests(exceptions.APIException):
    """429 for a limit on concurrent work (not a rate limit: no Retry-After to promise)."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_requests"
    default_detail = "Too much of this work is already running; try again when some has finished."


class ScopeMissing(exceptions.PermissionDenied):
    """403 for an agent key without the scope an operation needs; ``fields`` names it."""

    default_code = "missing_scope"

    def __init__(self, scope: str, action: str) -> None:
        super().__init__(
            f"This agent key may not {action}: it lacks the '{scope}' scope. "
            "An administrator can create a key with that scope in the console.",
            code=self.default_code,
        )
        self.fields = {"scope": [scope]}


class TooManyPending(exceptions.APIException):
    """429: the agent already has as many writes waiting for review as it may."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "review_queue_full"


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF nests errors for nested serializers; clients get dotted field names."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors":
                name = prefix or "non_field_errors"
            for field, messages in _flatten(value, name).items():
                out.setdefault(field, []).extend(messages)
    elif isinstance(detail, list):
        for item in detail:
            if isinstance(item, dict | list):
                for field, messages in _flatten(item, prefix).items():
                    out.setdefault(field, []).extend(messages)
            else:
                out.setdefault(prefix or "non_field_errors", []).append(str(item))
    else:
        out.setdefault(prefix or "non_field_errors", []).append(str(detail))
    return out


def _retry_hint(response: Response) -> str:
    seconds = response.headers.get("Retry-After")
    if not seconds:
        return ""
    return f" Try again in {seconds} second{'' if seconds == '1' else 's'}."


# How long a client should wait before trying again while the database is
# unreachable: about what a PostgreSQL restart or a managed failover takes.
DATABASE_RETRY_AFTER_SECONDS = 5
DATABASE_UNAVAILABLE_MESSAGE = (
    "The service cannot reach its database right now. "
    f"Try again in {DATABASE_RETRY_AFTER_SECONDS} seconds; a write sent with an "
    "Idempotency-Key can be sent again safely."
)


# What a lost or restarting database raises (or a query it cancelled):
# transient, with the transaction rolled back, so the client should retry
# rather than see a server error. psycopg's own classes too: a statement run
# on the raw connection, past Django's cursor, is not translated unless its
# caller does it (governance.rls does), and an outage must not become a 500
# because some library forgot.
DATABASE_LOST = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


def database_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a lost database, or was raised while handling one.

    Django turns some into errors of its own: a session it could not save
    becomes an interrupted session (a 400), raised while handling the lost
    connection.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, DATABASE_LOST):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def database_unavailable() -> Response:
    """503 while the database cannot be reached; the client may send the same request again.

    A write sent with an Idempotency-Key is safe to repeat: if the first one
    was committed before the connection broke, the repeat answers with it.
    """
    return Response(
        error_body("unavailable", DATABASE_UNAVAILABLE_MESSAGE),
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if database_lost(exc):
        # Logged, since someone must look if it lasts.
        logger.warning("API request failed on the database: %s", exc)
        return database_unavailable()
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        names = ", ".join(sorted(fields))
        response.data = error_body("invalid", f"The request is invalid: {names}.", fields)
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if isinstance(exc, exceptions.Throttled):
            # DRF has already set Retry-After from the wait.
            code = "rate_limited"
            message = "Too many requests with this key in the last minute." + _retry_hint(response)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            response.status_code = status.HTTP_401_UNAUTHORIZED
            code = "unauthenticated"
        response.data = error_body(str(code), str(message), getattr(exc, "fields", None))
    return response


# Django's error handlers (memoryadmin/urls.py). Errors raised outside DRF (no
# URL matched, a path converter refused a segment, a body Django itself
# refused, an unexpected exception) answer the API's JSON shape on API paths
# and Django's own pages everywhere else.


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path):
        return api_error(404, "not_found", "Not found.")
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if database_lost(exception):
        return _database_unavailable_page(request)
    if is_api_path(request.path):
        if isinstance(exception, RequestDataTooBig):
            return api_error(413, "too_large", "The request body is too large.")
        return api_error(400, "invalid", "The request is invalid.")
    try:
        return defaults.bad_request(request, exception)
    except CSPNonceError:
        # Refused by a middleware on the way out (the session could not be
        # saved): the Content-Security-Policy header is written by then, so
        # the page cannot have its nonce, nor the request's menu.
        return HttpResponseBadRequest(loader.render_to_string("400.html"))


def server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this handler inside its except block, so the exception is
    # at hand: a database lost outside a DRF view (in a middleware, while a
    # console page renders) is a 503 too.
    if database_lost(sys.exc_info()[1]):
        return _database_unavailable_page(request)
    if is_api_path(request.path):
        return api_error(
            500, "server_error", "Something went wrong on our side; the request was not completed."
        )
    try:
        # With the request, so the page keeps the console's menu and styles.
        return render(request, "500.html", status=500)
    except Exception:  # the menu needs the database, which may be what failed
        return defaults.server_error(request)


def _database_unavailable_page(request: HttpRequest) -> HttpResponse:
    response: HttpResponse
    if is_api_path(request.path):
        response = api_error(503, "unavailable", DATABASE_UNAVAILABLE_MESSAGE)
    else:
        # Rendered without the request: the menu and the signed-in person
        # come from the database that cannot be reached.
        response = HttpResponse(loader.render_to_string("503.html"), status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response
