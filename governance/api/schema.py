"""The OpenAPI contract's shared parts: the one error schema and the errors every operation documents.

Every error the API answers has the shape ``governance.api.errors.error_body``
builds; ``ErrorSerializer`` describes exactly that, and ``ContractAutoSchema``
adds it to each operation for the statuses that operation can answer, so a
generated client or a conformance fuzzer (tests/governance/api/test_fuzz.py)
learns them without every view repeating them. A view documents only what is
particular to it (a 409, a 403 with its own codes), with ``error_response``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema_field
from rest_framework import serializers

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


# Output fields for bodies the views already shape: they keep each value as it
# is (DRF's own fields would turn 3 into 3.0 or "+00:00" into "Z", and clients
# are written against the bodies as they are) while the schema states its type.


@extend_schema_field(OpenApiTypes.DATETIME)
class Timestamp(serializers.CharField):
    """An ISO 8601 time the view has already formatted (``datetime.isoformat()``)."""


@extend_schema_field(OpenApiTypes.NUMBER)
class Number(serializers.Field):
    """A number sent as computed: integers stay integers."""

    def to_representation(self, value: Any) -> Any:
        return value


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable machine-readable code: invalid, unauthenticated, permission_denied, "
        "missing_scope, not_found, conflict, too_large, rate_limited, ..."
    )
    message = serializers.CharField(help_text="What went wrong, in plain words, for a person to read.")
    # DRF moves declared fields off the class, so this does not shadow Serializer.fields.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Messages per request field (dotted for nested fields, e.g. source.type); "
        "empty when the error is not about a field.",
    )


class ErrorSerializer(serializers.Serializer):
    """The API's one error body: ``{"error": {"code", "message", "fields"}}``."""

    error = ErrorDetailSerializer()


# One example per status, each a body the API really sends (tests pin these messages).
_EXAMPLES: dict[int, tuple[str, str, str, dict[str, list[str]]]] = {
    400: (
        "Invalid input",
        "invalid",
        "The request is invalid: statement.",
        {"statement": ["This field is required."]},
    ),
    401: (
        "No valid credential",
        "unauthenticated",
        "Authentication credentials were not provided.",
        {},
    ),
    403: (
        "Not allowed",
        "permission_denied",
        "You do not have permission to perform this action.",
        {},
    ),
    404: ("Not found", "not_found", "Not found.", {}),
    409: ("Conflict", "conflict", "The request conflicts with the current state.", {}),
    413: (
        "Body too large",
        "too_large",
        "The request body is 3,145,728 bytes; the limit is 1,048,576 bytes.",
        {},
    ),
    429: (
        "Rate limited",
        "rate_limited",
        "Too many requests with this key in the last minute. Try again in 12 seconds.",
        {},
    ),
}

_DESCRIPTIONS: dict[int, str] = {
    400: "Invalid input: `fields` names each field that was refused and why. Nothing was changed.",
    401: "No credential, or one that is unknown, revoked, expired or of the other API's kind.",
    403: "The credential may not do this here (a missing key scope, or a role that does not allow it).",
    404: "Nothing with this id within the caller's projects (another project's ids answer the same).",
    409: "The request conflicts with the current state.",
    413: "The request body is larger than the API accepts.",
    429: "Too many requests with this credential, or too much of this work already waiting. "
    "`Retry-After` gives the seconds to wait when a rate limit was hit.",
}


def error_example(status: int, *, code: str | None = None, message: str | None = None) -> OpenApiExample:
    name, default_code, default_message, fields = _EXAMPLES[status]
    return OpenApiExample(
        name,
        value={
            "error": {
                "code": code or default_code,
                "message": message or default_message,
                "fields": fields if code is None else {},
            }
        },
        response_only=True,
    )


def error_response(
    status: int, description: str | None = None, *, examples: list[OpenApiExample] | None = None
) -> OpenApiResponse:
    """An error status in the shared error schema, with what it means for this operation."""
    return OpenApiResponse(
        ErrorSerializer,
        description=description or _DESCRIPTIONS[status],
        examples=examples or [error_example(status)],
    )


class ContractAutoSchema(AutoSchema):
    """Adds the errors every operation can answer, in the one error schema.

    Which ones apply follows from what the request edge does: every operation
    needs a credential (401) that may lack the right (403) and is rate limited
    (429); a path with an id can name nothing the caller can see (404); a
    request with a body or query parameters can be invalid (400), and a body
    can be too large (413). An operation's own documentation of a status wins.
    """

    # extend_schema subclasses this class per view and answers get_response_serializers
    # itself, so the errors are added one step later, where the bodies are built.
    def _get_response_bodies(self, direction: Any = "response") -> Any:
        if not isinstance(self.get_response_serializers(), dict):
            # Every operation states its success status, so none is guessed from the method.
            raise TypeError(
                f"{self.method} {self.path}: declare responses as {{status: serializer}} in extend_schema"
            )
        responses = super()._get_response_bodies(direction)
        for status in self._error_statuses():
            code = str(status)
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    error_response(status), code, direction=direction
                )
        return responses

    def get_override_parameters(self) -> list[Any]:
        return [
            *super().get_override_parameters(),
            OpenApiParameter(
                "Retry-After",
                int,
                OpenApiParameter.HEADER,
                response=[429],
                required=False,
                description="Seconds until the rate limit allows this credential again.",
            ),
        ]

    def _error_statuses(self) -> list[int]:
        statuses = [401, 403, 429]
        if "{" in self.path:
            statuses.append(404)
        has_query = any(
            (isinstance(p, OpenApiParameter) and p.location == OpenApiParameter.QUERY)
            or (isinstance(p, type) and issubclass(p, serializers.Serializer))
            for p in self.get_override_parameters()
        )
        has_body = self.method in BODY_METHODS and self.get_request_serializer() is not None
        if has_body or has_query:
            statuses.append(400)
        if has_body:
            statuses.append(413)
        return sorted(statuses)


def blank_query_means_absent(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Optional query parameters accept an empty value, as DRF reads it: not given.

    DRF treats ``?mode=`` or ``?limit=`` like no such parameter when it is
    optional (a form submitted with an empty filter), while drf-spectacular
    documents ``minLength: 1``, an enum without "" or a bare integer; the
    contract says what the server does (the fuzzer found the difference).
    """
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if parameter.get("in") != "query" or parameter.get("required"):
                    continue
                schema = parameter.get("schema", {})
                if "enum" in schema:
                    schema.pop("minLength", None)
                    if "" not in schema["enum"]:
                        schema["enum"] = [*schema["enum"], ""]
                elif schema.get("type") == "string":
                    schema.pop("minLength", None)
                else:
                    parameter["schema"] = {"anyOf": [schema, {"type": "string", "maxLength": 0}]}
    return result
