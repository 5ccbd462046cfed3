"""GET /api/v1/admin/projects/{project}/why: why didn't an agent know something (issue 14 item 6)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from governance import access
from governance.api.base import GovernanceAPIView
from governance.api.schema import error_response
from governance.models import Agent, Project
from governance.rules.attribution import VERDICTS
from governance.selectors import attribution as selectors


class WhyQuery(serializers.Serializer):
    principal = serializers.CharField(max_length=200, help_text="The person's external id.")
    phrase = serializers.CharField(
        min_length=2, max_length=200, help_text="Words from the fact the agent did not know."
    )
    agent = serializers.SlugField(
        max_length=64,
        required=False,
        help_text="Agent slug: judge by this agent's policy (kinds it is given).",
    )


class AttributionSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=VERDICTS)
    explanation = serializers.CharField(help_text="Plain words: where the memory was lost.")
    fact_id = serializers.IntegerField(allow_null=True)
    statement = serializers.CharField(allow_null=True)


class WhyResponseSerializer(serializers.Serializer):
    principal = serializers.CharField()
    phrase = serializers.CharField()
    attributions = AttributionSerializer(many=True)


class WhyDidntItKnow(GovernanceAPIView):
    # Read-only: declaring roles lets another method reach its 405 rather than
    # a 403 that would suggest a role could allow it.
    write_roles = access.READ_ROLES

    @extend_schema(
        parameters=[WhyQuery],
        responses={
            200: WhyResponseSerializer,
            400: error_response(400, "principal or phrase missing or invalid."),
            404: error_response(404, "Not a project (or agent) of yours."),
        },
        summary="Why didn't it know? Attribute a missing memory to storage, retrieval or use",
    )
    def get(self, request: Request, project: str) -> Response:
        obj = get_object_or_404(Project, slug=project)
        self.check(request, obj)
        query = WhyQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        agent = get_object_or_404(Agent, project=obj, slug=data["agent"]) if data.get("agent") else None
        answer = selectors.why_missing(obj, data["principal"], data["phrase"], agent=agent)
        body = {
            "principal": answer.principal,
            "phrase": answer.phrase,
            "attributions": [
                {
                    "verdict": a.verdict,
                    "explanation": a.explanation,
                    "fact_id": a.fact_id,
                    "statement": answer.statements.get(a.fact_id) if a.fact_id else None,
                }
                for a in answer.attributions
            ],
        }
        return Response(WhyResponseSerializer(body).data)
