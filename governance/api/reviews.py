"""Governance API: the review queue and decisions, for people with personal access tokens.

GET /api/v1/admin/reviews and POST /api/v1/admin/reviews/{write_id}/decision
(docs/api.md, "Governance API"); the same selectors and service as the console.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from governance import access
from governance.api.base import (
    CursorField,
    GovernanceAPIView,
    KeysetQuery,
    keyset_page,
    page_limit,
    page_response,
    valid_query,
)
from governance.api.errors import Conflict
from governance.api.schema import Timestamp, error_response
from governance.api.writes import (
    FindingSerializer,
    SourceOutSerializer,
    WriteDetailSerializer,
    write_detail,
    write_fields,
)
from governance.models import Write
from governance.selectors import reviews as review_selectors
from governance.services import reviews as review_service


class QueueQuerySerializer(KeysetQuery):
    status = serializers.ChoiceField(choices=review_selectors.QUEUE_STATUSES, required=False)
    cursor = CursorField(
        review_selectors.QueueCursor.decode,
        allow_blank=True,
        help_text="The `next` value of the previous page.",
    )
    limit = page_limit(default=review_selectors.PAGE_SIZE)


class DecisionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(
        choices=["approve", "reject", "keep_both"],
        help_text="`keep_both`: for a write that may contradict a current fact (its `conflicts_with`), "
        "both are right; neither replaces the other.",
    )
    reason = serializers.CharField(max_length=2000, trim_whitespace=True)
    # Given: edit-and-approve with this statement instead of the agent's.
    statement = serializers.CharField(max_length=4000, trim_whitespace=True, required=False, allow_null=True)

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        if attrs.get("statement") is not None and attrs["action"] != "approve":
            raise serializers.ValidationError({"statement": ["Only an approval can edit the statement."]})
        return attrs


class ReviewRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=review_selectors.QUEUE_STATUSES)
    principal = serializers.CharField(allow_null=True)
    kind = serializers.CharField()
    key = serializers.CharField(allow_null=True)
    statement = serializers.CharField(allow_blank=True)
    source = SourceOutSerializer()  # type: ignore[assignment]  # a declared field, not Field.source
    authority = serializers.IntegerField()
    risk = serializers.IntegerField(help_text="Higher is riskier; the queue is ordered by it.")
    findings = FindingSerializer(many=True)
    conflicts_with = serializers.IntegerField(allow_null=True, help_text="The active fact it would replace.")
    created_at = Timestamp()


ReviewQueuePageSerializer = keyset_page("ReviewQueuePage", ReviewRowSerializer)


def review_row(write: Write) -> dict[str, object]:
    return {**write_fields(write), "risk": write.risk}


class ReviewQueue(GovernanceAPIView):
    write_roles = access.REVIEW_ROLES

    @extend_schema(
        responses={200: ReviewQueuePageSerializer},
        parameters=[QueueQuerySerializer],
        summary="Pending and quarantined writes, riskiest first, then oldest",
    )
    def get(self, request: Request) -> Response:
        query = valid_query(QueueQuerySerializer, request)
        page = review_selectors.review_queue(
            access.projects_of(request.user),
            status=query.validated_data.get("status"),
            **query.page(),
        )
        return page_response(
            ReviewQueuePageSerializer,
            [review_row(w) for w in page.writes],
            page.next.encode() if page.next else None,
        )


class ReviewDecisionView(GovernanceAPIView):
    write_roles = access.REVIEW_ROLES

    @extend_schema(
        responses={
            200: WriteDetailSerializer,
            409: error_response(
                409,
                "Already decided, or an approval of a statement that was withdrawn for "
                "this person (code `withdrawn`; rejecting it is still possible).",
            ),
        },
        request=DecisionSerializer,
        summary="Approve, reject, edit-and-approve a write, or keep both of a possible conflict",
    )
    def post(self, request: Request, write_id: int) -> Response:
        # The write's project before validation: another project's id is a 404 whatever the
        # body says (R1); a role there that may not review is a 403.
        write = get_object_or_404(Write, pk=write_id, project__in=access.projects_of(request.user))
        self.check(request, write.project_id)
        serializer = DecisionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        decision = review_service.Decision(data["action"], data["reason"], statement=data.get("statement"))
        try:
            review_service.decide(write.pk, decision, reviewer=request.user)
        except review_service.AlreadyDecided as exc:
            raise Conflict(f"Write {write.pk}: {review_selectors.decided_info(write.pk).message}") from exc
        except review_service.Tombstoned as exc:
            raise Conflict(f"Write {write.pk}: {exc}", code="withdrawn") from exc
        except review_service.InvalidDecision as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        decided = (
            Write.objects.select_related("principal", "session", "fact")
            .prefetch_related("decisions__reviewer")
            .get(pk=write.pk)
        )
        return Response(WriteDetailSerializer(write_detail(decided)).data)
