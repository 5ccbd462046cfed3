"""POST /api/v1/retrieve and GET /api/v1/retrievals/{id} (docs/api.md)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.base import AgentAPIView, represent, validated
from governance.api.errors import Conflict
from governance.api.limits import MAX_ROUND, db_id
from governance.api.schema import Number, Timestamp, error_response
from governance.models import RetrievalEvent
from governance.models.credentials import KeyScope
from governance.rules.retrieval import MODES, REASONS
from governance.services import retrievals as retrieval_service
from governance.services.sessions import SessionError


class RetrieveRequestSerializer(serializers.Serializer):
    principal = serializers.CharField(max_length=200, allow_null=True, required=True)
    session = serializers.CharField(max_length=200, allow_null=True, required=False)
    query = serializers.CharField(
        max_length=8000, allow_blank=True, required=False, default="", trim_whitespace=False
    )
    round = serializers.IntegerField(min_value=1, max_value=MAX_ROUND, required=False, default=1)
    identity_verified = serializers.BooleanField(required=False, default=False)

    @staticmethod
    def to_request(data: dict[str, Any]) -> retrieval_service.RetrieveRequest:
        """The service's request for this serializer's validated data."""
        return retrieval_service.RetrieveRequest(
            principal=data["principal"],
            session=data.get("session"),
            query=data.get("query") or "",
            round=data.get("round") or 1,
            identity_verified=bool(data.get("identity_verified")),
        )


class RetrievedItemSerializer(serializers.Serializer):
    fact_id = serializers.IntegerField()
    statement = serializers.CharField()
    kind = serializers.CharField()
    source_type = serializers.CharField()
    source_ref = serializers.CharField()
    authority = serializers.IntegerField()
    age_days = serializers.IntegerField()
    tier = serializers.ChoiceField(choices=["recent", "confirm"])
    tokens = serializers.IntegerField()


class RetrieveResponseSerializer(serializers.Serializer):
    retrieval_id = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=["resume", "confirm", "new"])
    # DRF moves declared fields off the class, so this does not shadow Serializer.context.
    context = serializers.CharField(help_text="The exact text to inject.")  # type: ignore[assignment]
    items = RetrievedItemSerializer(many=True)
    tokens_used = serializers.IntegerField()
    token_budget = serializers.IntegerField()
    policy_version = serializers.IntegerField()
    candidates = serializers.IntegerField()
    excluded = serializers.IntegerField()


class CandidateSerializer(serializers.Serializer):
    fact_id = serializers.IntegerField()
    decision = serializers.ChoiceField(choices=["selected", "excluded"])
    reason = serializers.ChoiceField(
        choices=REASONS, allow_null=True, help_text="Why it was excluded; null when selected."
    )
    scores = serializers.DictField(
        child=Number(), help_text="relevance, freshness, confidence and their weighted total."
    )
    tier = serializers.CharField(allow_null=True, help_text="recent or confirm; null when not eligible.")
    age_days = serializers.IntegerField()
    tokens = serializers.IntegerField()
    per_round = serializers.BooleanField()
    rank = serializers.IntegerField(allow_null=True)


class RetrievalDetailSerializer(serializers.Serializer):
    retrieval_id = serializers.IntegerField()
    agent = serializers.CharField()
    principal = serializers.CharField(allow_null=True)
    session = serializers.CharField(allow_null=True)
    round = serializers.IntegerField()
    query = serializers.CharField(allow_blank=True)
    mode = serializers.ChoiceField(choices=MODES)
    identity_verified = serializers.BooleanField()
    policy_version = serializers.IntegerField()
    # DRF moves declared fields off the class, so this does not shadow Serializer.context.
    context = serializers.CharField(help_text="The exact text returned.")  # type: ignore[assignment]
    tokens_used = serializers.IntegerField()
    token_budget = serializers.IntegerField()
    candidates = CandidateSerializer(many=True)
    candidate_count = serializers.IntegerField()
    excluded = serializers.IntegerField()
    static_block_cached = serializers.BooleanField()
    cache_note = serializers.CharField(
        allow_blank=True, help_text="Why a cached block was or was not reused."
    )
    timings = serializers.DictField(child=Number(), help_text="Milliseconds per step.")
    created_at = Timestamp()


def event_fields(event: RetrievalEvent) -> dict[str, object]:
    """What the retrieval log's rows and one retrieval's detail both say about an event."""
    return {
        "agent": event.agent.slug,
        "principal": event.principal.external_id if event.principal else None,
        "session": event.session.external_id if event.session else None,
        "round": event.round,
        "query": event.query,
        "mode": event.mode,
        "identity_verified": event.identity_verified,
        "policy_version": event.policy_version.version,
        "context": event.context,
        "tokens_used": event.tokens_used,
        "token_budget": event.token_budget,
        "excluded": event.excluded_count,
        "static_block_cached": event.static_block_cached,
        "created_at": event.created_at.isoformat(),
    }


def event_detail(event: RetrievalEvent) -> dict[str, object]:
    return {
        **event_fields(event),
        "retrieval_id": event.pk,
        "candidates": [
            {
                "fact_id": c.fact_id,
                "decision": c.decision,
                "reason": c.reason,
                "scores": c.scores,
                "tier": c.tier,
                "age_days": c.age_days,
                "tokens": c.tokens,
                "per_round": c.per_round,
                "rank": c.rank,
            }
            for c in event.ranked_candidates()
        ],
        "candidate_count": event.candidate_count,
        "cache_note": event.cache_note,
        "timings": event.timings,
    }


class Retrieve(AgentAPIView):
    scopes = {"POST": (KeyScope.READ, "retrieve memory")}

    @extend_schema(
        request=RetrieveRequestSerializer,
        responses={200: RetrieveResponseSerializer},
        summary="Retrieve the context block for a principal",
    )
    def post(self, request: Request) -> Response:
        data = validated(RetrieveRequestSerializer, request.data)
        try:
            event, result = retrieval_service.retrieve(
                self.agent(request), RetrieveRequestSerializer.to_request(data)
            )
        except SessionError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        return Response(represent(RetrieveResponseSerializer, retrieval_service.response_body(event, result)))


class RetrievalDetail(AgentAPIView):
    scopes = {"GET": (KeyScope.READ, "read retrievals")}

    @extend_schema(
        responses={200: RetrievalDetailSerializer},
        summary="One retrieval event with every candidate's decision",
    )
    def get(self, request: Request, retrieval_id: int) -> Response:
        event = get_object_or_404(
            RetrievalEvent.objects.select_related("agent", "principal", "session", "policy_version"),
            pk=retrieval_id,
            project=self.project(request),
        )
        return Response(represent(RetrievalDetailSerializer, event_detail(event)))


# Feedback names items the retrieval gave, so it is never longer than max_items allows.
MAX_FEEDBACK_IDS = 200


class FeedbackRequestSerializer(serializers.Serializer):
    used = serializers.ListField(
        child=db_id(),
        max_length=MAX_FEEDBACK_IDS,
        help_text="Fact ids of the injected items the agent actually used.",
    )
    wrong = serializers.ListField(
        child=db_id(),
        max_length=MAX_FEEDBACK_IDS,
        required=False,
        default=list,
        help_text="Fact ids of injected items the agent found wrong (optional).",
    )


class FeedbackResponseSerializer(serializers.Serializer):
    retrieval_id = serializers.IntegerField()
    used = serializers.ListField(child=serializers.IntegerField())
    wrong = serializers.ListField(child=serializers.IntegerField())
    stale_used = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Used items that had been superseded, withdrawn or had expired when the feedback arrived.",
    )
    created_at = Timestamp()


class RetrievalFeedbackView(AgentAPIView):
    scopes = {"POST": (KeyScope.READ, "give feedback on retrievals")}

    @extend_schema(
        request=FeedbackRequestSerializer,
        responses={
            201: FeedbackResponseSerializer,
            400: error_response(400, "An id the retrieval did not give, or a malformed list."),
            404: error_response(404, "No such retrieval in the key's project."),
            409: error_response(409, "This retrieval already has feedback."),
        },
        summary="Say which injected items the agent used, and which it found wrong",
    )
    def post(self, request: Request, retrieval_id: int) -> Response:
        event = get_object_or_404(RetrievalEvent, pk=retrieval_id, project=self.project(request))
        serializer = FeedbackRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            feedback = retrieval_service.record_feedback(
                self.agent(request),
                event,
                used=serializer.validated_data["used"],
                wrong=serializer.validated_data.get("wrong") or [],
            )
        except retrieval_service.FeedbackError as exc:
            if exc.conflict:
                raise Conflict(str(exc)) from exc
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        body = FeedbackResponseSerializer(
            {
                "retrieval_id": event.pk,
                "used": feedback.used,
                "wrong": feedback.wrong,
                "stale_used": feedback.stale_used,
                "created_at": feedback.created_at.isoformat(),
            }
        ).data
        return Response(body, status=201)
