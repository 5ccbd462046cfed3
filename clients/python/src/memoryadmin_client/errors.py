"""Exceptions carrying the API's one error shape: {"error": {"code", "message", "fields"}}."""

from __future__ import annotations

from typing import Any


class MemoryAdminError(Exception):
    """Base class of every error this client raises."""


class TransportError(MemoryAdminError):
    """The service could not be reached, or stopped answering, after every retry."""


class APIError(MemoryAdminError):
    """The service answered with an error; ``code``, ``message`` and ``fields`` are its JSON error."""

    status: int

    def __init__(self, status: int, body: Any, *, retry_after: float | None = None) -> None:
        error = body.get("error") if isinstance(body, dict) else None
        error = error if isinstance(error, dict) else {}
        self.status = status
        self.body = body
        self.code: str = str(error.get("code") or f"http_{status}")
        self.message: str = str(error.get("message") or f"The service answered {status}.")
        fields = error.get("fields")
        self.fields: dict[str, list[str]] = fields if isinstance(fields, dict) else {}
        self.retry_after = retry_after
        super().__init__(f"{status} {self.code}: {self.message}")


class BadRequest(APIError):
    """400: the request was malformed; ``fields`` names what to fix. Nothing was changed."""


class Unauthorized(APIError):
    """401: no valid agent key."""


class Forbidden(APIError):
    """403: the key may not do this (a missing scope, a source type it may not claim...)."""


class NotFound(APIError):
    """404: no such thing in the key's project (or not visible to this agent)."""


class Conflict(APIError):
    """409: an idempotency conflict, or the thing is already in the requested state."""


class PayloadTooLarge(APIError):
    """413: the body is larger than the service accepts."""


class RateLimited(APIError):
    """429: too many requests, or too many writes waiting for review; see ``retry_after``."""


class ServiceUnavailable(APIError):
    """503 (or another 5xx) after every retry."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: RateLimited,
}


def error_for(status: int, body: Any, *, retry_after: float | None = None) -> APIError:
    cls = _BY_STATUS.get(status) or (ServiceUnavailable if status >= 500 else APIError)
    return cls(status, body, retry_after=retry_after)
