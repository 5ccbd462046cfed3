"""Shared pieces of the API views: authentication sets and the project of the caller."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from governance.api.auth import (
    AccessTokenAuthentication,
    AgentKeyAuthentication,
    AgentPrincipal,
    HasRole,
    IsAgent,
)
from governance.models import Agent, Project


class AgentAPIView(APIView):
    """Agent API: Bearer agent key; everything is scoped to the key's project (R1)."""

    authentication_classes = [AgentKeyAuthentication]
    permission_classes = [IsAgent]

    def caller(self, request: Request) -> AgentPrincipal:
        assert isinstance(request.user, AgentPrincipal)
        return request.user

    def agent(self, request: Request) -> Agent:
        return self.caller(request).agent

    def project(self, request: Request) -> Project:
        return self.caller(request).project


class GovernanceAPIView(APIView):
    """Governance API for people: personal access tokens and role checks."""

    authentication_classes = [AccessTokenAuthentication]
    permission_classes = [HasRole]
    write_roles: frozenset[str] | None = None


def check_period(attrs: dict[str, Any]) -> dict[str, Any]:
    """Shared by the listing queries: an empty or inverted period is a client error."""
    since, until = attrs.get("since"), attrs.get("until")
    if since and until and since >= until:
        raise serializers.ValidationError({"until": ["Must be after since."]})
    return attrs
