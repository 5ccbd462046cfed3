"""GET /api/v1/key: which agent, project and scopes a key carries.

Integrations (the MCP server, the LangGraph store) check a key once at start-up and
tell their user plainly what it may do, instead of discovering it from a 403 later.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.auth import IsAgent
from governance.api.base import AgentAPIView
from governance.models.credentials import KeyScope


class KeyInfoSerializer(serializers.Serializer):
    project = serializers.CharField(help_text="The project's slug; everything the key sees is in it.")
    agent = serializers.CharField(help_text="The agent's slug.")
    key = serializers.CharField(help_text="The key's public prefix (never the secret).")
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=KeyScope.values),
        help_text="What the key may do: read (retrieve, read facts), write (propose memories), "
        "forget (withdraw memories on a person's request).",
    )


class KeyInfo(AgentAPIView):
    # Any valid key may ask what it is: no scope is needed, so HasKeyScope (which
    # refuses methods without a declared scope) is deliberately left out here.
    permission_classes = [IsAgent]

    @extend_schema(
        responses={200: KeyInfoSerializer}, summary="The calling key: its agent, project and scopes"
    )
    def get(self, request: Request) -> Response:
        key = self.caller(request).key
        body = {
            "project": key.agent.project.slug,
            "agent": key.agent.slug,
            "key": key.prefix,
            "scopes": sorted(key.scopes),
        }
        return Response(KeyInfoSerializer(body).data)
