"""The API's one error shape: {"error": {"code", "message", "fields"}} (DESIGN.md)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


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


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
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
