"""Facts for agents: one fact, a principal's memories, withdrawal on the person's request."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.base import AgentAPIView
from governance.api.errors import Conflict
from governance.models import Fact, Principal
from governance.rules.retrieval import age_in_days
from governance.selectors import facts as fact_selectors
from governance.services import facts as fact_service


def fact_body(fact: Fact, *, policy_tiers: tuple[int, int] | None = None) -> dict[str, object]:
    age = age_in_days(fact.last_verified_at, timezone.now())
    body: dict[str, object] = {
        "id": fact.pk,
        "principal": fact.principal.external_id if fact.principal else None,
        "kind": fact.kind,
        "key": fact.key,
        "statement": fact.statement,
        "status": fact.status,
        "status_reason": fact.status_reason,
        "source": {
            "type": fact.source_type,
            "ref": fact.source_ref,
            "observed_at": fact.source_observed_at.isoformat(),
            "writer": fact.writer,
        },
        "authority": fact.authority,
        "confidence": fact.confidence,
        "valid_from": fact.valid_from.isoformat() if fact.valid_from else None,
        "valid_to": fact.valid_to.isoformat() if fact.valid_to else None,
        "recorded_at": fact.recorded_at.isoformat(),
        "last_verified_at": fact.last_verified_at.isoformat(),
        "age_days": age,
        "embedded": fact.is_embedded,
        "token_count": fact.token_count,
    }
    if policy_tiers is not None:
        recent, confirm = policy_tiers
        body["tier"] = "recent" if age <= recent else "confirm" if age <= confirm else "stale"
    return body


class FactDetail(AgentAPIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT}, summary="One fact with provenance and its supersession chain"
    )
    def get(self, request: Request, fact_id: int) -> Response:
        fact = get_object_or_404(
            Fact.objects.select_related("principal"), pk=fact_id, project=self.project(request)
        )
        body = fact_body(fact)
        chain = fact_selectors.supersession_chain(fact)
        body["supersession_chain"] = chain
        # The direct neighbours, for clients that only need "what replaced this".
        body["supersedes"] = [link["old_fact"] for link in chain if link["new_fact"] == fact.pk]
        body["superseded_by"] = [link["new_fact"] for link in chain if link["old_fact"] == fact.pk]
        return Response(body)


class WithdrawSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, trim_whitespace=True)


class FactWithdraw(AgentAPIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        request=WithdrawSerializer,
        summary="Withdraw a fact on the person's request (R8)",
    )
    def post(self, request: Request, fact_id: int) -> Response:
        fact = get_object_or_404(Fact, pk=fact_id, project=self.project(request))
        serializer = WithdrawSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            tombstone = fact_service.withdraw_fact(
                fact, reason=serializer.validated_data["reason"], actor=f"agent:{self.agent(request).slug}"
            )
        except fact_service.FactStateError as exc:
            raise Conflict(str(exc)) from exc
        return Response(
            {
                "id": fact.pk,
                "status": "withdrawn",
                "tombstone": {
                    "id": tombstone.pk,
                    "reason": tombstone.reason,
                    "actor": tombstone.actor,
                    "created_at": tombstone.created_at.isoformat(),
                },
            }
        )


class PrincipalMemories(AgentAPIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT}, summary="What the agent currently believes about this person"
    )
    def get(self, request: Request, external_id: str) -> Response:
        principal = get_object_or_404(Principal, project=self.project(request), external_id=external_id)
        agent = self.agent(request)
        assert agent.active_policy is not None
        policy = agent.active_policy.policy
        facts = fact_selectors.active_memories(principal)
        return Response(
            {
                "principal": principal.external_id,
                "memories": [
                    fact_body(f, policy_tiers=(policy.recent_days, policy.confirm_days)) for f in facts
                ],
            }
        )
