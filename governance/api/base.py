"""Shared pieces of the API views: authentication sets and the project of the caller."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rest_framework import permissions, serializers
from rest_framework.request import Request
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


def check_period(attrs: dict[str, Any]) -> dict[str, Any]:
    """Shared by the listing queries: an empty or inverted period is a client error."""
    since, until = attrs.get("since"), attrs.get("until")
    if since and until and since >= until:
        raise serializers.ValidationError({"until": ["Must be after since."]})
    return attrs
