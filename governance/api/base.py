"""Shared pieces of the API views: authentication sets and the project of the caller."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from rest_framework import permissions, serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from governance import access
from governance.api.auth import (
    AccessTokenAuthentication,
    AgentKeyAuthentication,
    AgentPrincipal,
    HasKeyScope,
    HasRole,
    IsAgent,
)
from governance.models import Agent, Project
from governance.selectors.cursors import InvalidCursor

S = TypeVar("S", bound=serializers.Serializer)
# Keyset-paged listings: rows per page unless the caller asks, and at most.
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


class AgentAPIView(APIView):
    """Agent API: Bearer agent key; everything is scoped to the key's project (R1)."""

    authentication_classes = [AgentKeyAuthentication]
    permission_classes = [IsAgent, HasKeyScope]
    # Per HTTP method: the key scope it needs, and what it does in words for the
    # 403 that names a missing scope ("may not <action>").
    scopes: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def caller(self, request: Request) -> AgentPrincipal:
        assert isinstance(request.user, AgentPrincipal)
        return request.user

    def agent(self, request: Request) -> Agent:
        return self.caller(request).agent

    def project(self, request: Request) -> Project:
        return self.caller(request).project


class GovernanceAPIView(APIView):
    """Governance API for people: personal access tokens and role checks per project.

    Reads need any role in the object's project, other methods ``write_roles``
    there; ``check`` answers 404 outside the user's projects and 403 (JSON
    error shape) when the role there does not allow the action.
    """

    authentication_classes = [AccessTokenAuthentication]
    permission_classes = [HasRole]
    write_roles: frozenset[str] | None = None

    def needed_roles(self, request: Request) -> frozenset[str]:
        if request.method in permissions.SAFE_METHODS:
            return access.READ_ROLES
        assert self.write_roles is not None, "HasRole refuses unsafe methods without write_roles"
        return self.write_roles

    def check(self, request: Request, project: Project | int, roles: Iterable[str] | None = None) -> str:
        needed = roles if roles is not None else self.needed_roles(request)
        return access.require_role(request.user, project, needed, action=f"{request.method} {request.path}")


# --- response bodies -------------------------------------------------------------


@functools.cache
def _shared(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    serializer = serializer_class()
    _build_fields(serializer)
    return serializer


def _build_fields(field: serializers.Field) -> None:
    """Bind every nested serializer's fields now, once, rather than on a request's thread."""
    # A method field calls into the serializer, which may read its per-request context.
    assert not isinstance(field, serializers.SerializerMethodField), "not for method fields"
    if isinstance(field, serializers.ListSerializer):
        if field.child is not None:
            _build_fields(field.child)
    elif isinstance(field, serializers.Serializer):
        for child in field.fields.values():
            _build_fields(child)
    elif isinstance(field, serializers.ListField | serializers.DictField):
        _build_fields(field.child)


def represent(serializer_class: type[serializers.Serializer], instance: Any) -> dict[str, Any]:
    """What ``serializer_class(instance).data`` answers, from one serializer made per class.

    A serializer copies its declared fields, and every nested serializer's,
    each time one is made: for a retrieval's items that was most of the time
    spent shaping the response. Turning a value into its representation with
    plain fields (no method fields, nothing read from the serializer's context)
    keeps no state on the serializer or its fields, so one made once serves
    every request and thread. The class stays the schema's source (drf-spectacular).
    """
    representation: dict[str, Any] = _shared(serializer_class).to_representation(instance)
    return representation


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """What ``serializer_class(data=data)`` validates ``data`` to, from one serializer made per class.

    Data it refuses raises the ValidationError ``is_valid(raise_exception=True)``
    raises, with the same details. Validation keeps no state on the serializer
    or its fields either (the ``validate_*`` methods and ``validate`` only read
    their arguments), so the shared one serves every thread, as in ``represent``.
    """
    try:
        value: dict[str, Any] = _shared(serializer_class).run_validation(data)
        return value
    except serializers.ValidationError as exc:
        # Typed as ValidationError's argument, not its stored detail: the null case below
        # replaces a list with a dict (djangorestframework-stubs 3.18 types the two apart).
        errors: Any = exc.detail
    # As Serializer.errors words it: a body that is null "may not be null" as a whole.
    if isinstance(errors, list) and len(errors) == 1 and getattr(errors[0], "code", None) == "null":
        errors = {api_settings.NON_FIELD_ERRORS_KEY: [ErrorDetail("No data provided", code="null")]}
    raise serializers.ValidationError(errors)


def check_period(attrs: dict[str, Any]) -> dict[str, Any]:
    """Shared by the listing queries: an empty or inverted period is a client error."""
    since, until = attrs.get("since"), attrs.get("until")
    if since and until and since >= until:
        raise serializers.ValidationError({"until": ["Must be after since."]})
    return attrs


# --- keyset-paged listings (history, retrieval log, review queue) -------------


class CursorField(serializers.CharField):
    """The previous page's ``next``, read back by ``decode``; a cursor the listing did not
    make is a 400 with the one cursor message."""

    def __init__(self, decode: Callable[[str], Any], **kwargs: Any) -> None:
        self.decode = decode
        kwargs.setdefault("help_text", "The previous page's `next`.")
        super().__init__(required=False, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not value:
            return None
        try:
            return self.decode(value)
        except InvalidCursor as exc:
            raise serializers.ValidationError(str(exc)) from exc


def page_limit(default: int = DEFAULT_LIMIT) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=default)


class KeysetQuery(serializers.Serializer):
    """A listing's query string (a period, if given, must not be empty): a subclass adds
    its filters and its ``cursor = CursorField(...)``."""

    limit = page_limit()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return check_period(attrs)

    def page(self) -> dict[str, Any]:
        """Where the page starts (the decoded cursor; None for the first) and its length."""
        return {"after": self.validated_data.get("cursor"), "limit": self.validated_data["limit"]}


def valid_query(serializer_class: type[S], request: Request) -> S:
    """The query string read by ``serializer_class``: a 400 with field errors if it does not fit."""
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query


def keyset_page(name: str, rows: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """A listing's page in the OpenAPI schema (component ``name``): its ``rows``, then the
    cursor of the next page."""
    fields = {
        "results": rows(many=True),
        "next": serializers.CharField(allow_null=True, help_text="Pass as `cursor` for the next page."),
    }
    return type(name, (serializers.Serializer,), fields)


def page_response(
    page_serializer: type[serializers.Serializer], results: list[Any], next_cursor: str | None
) -> Response:
    """One page: its rows, and the cursor of the next page (null on the last)."""
    return Response(page_serializer({"results": results, "next": next_cursor}).data)
