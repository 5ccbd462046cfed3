"""GET /api/v1/admin/retrievals: the retrieval log for auditors (docs/api.md)."""

from __future__ import annotations

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
    page_response,
    valid_query,
)
from governance.api.retrievals import event_fields
from governance.api.schema import Timestamp
from governance.models import RetrievalEvent
from governance.rules.retrieval import MODES, REASONS
from governance.selectors import retrievals as selectors


class RetrievalLogQuery(KeysetQuery):
    agent = serializers.CharField(required=False, max_length=64, help_text="Agent slug.")
    principal = serializers.CharField(required=False, max_length=200, help_text="Principal external id.")
    session = serializers.CharField(required=False, max_length=200, help_text="Session external id.")
    mode = serializers.ChoiceField(choices=MODES, required=False)
    reason = serializers.ChoiceField(
        choices=REASONS, required=False, help_text="Events that excluded a candidate for this reason."
    )
    over_budget = serializers.BooleanField(required=False, default=False)
    since = serializers.DateTimeField(required=False, help_text="Inclusive, ISO 8601.")
    until = serializers.DateTimeField(required=False, help_text="Exclusive, ISO 8601.")
    cursor = CursorField(selectors.decode_cursor)

    def filters(self) -> selectors.LogFilters:
        data = self.validated_data
        return selectors.LogFilters(
            agent=data.get("agent"),
            principal=data.get("principal"),
            session=data.get("session"),
            mode=data.get("mode"),
            reason=data.get("reason"),
            since=data.get("since"),
            until=data.get("until"),
            over_budget=data["over_budget"],
        )


class RetrievalSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField()
    agent = serializers.CharField()
    principal = serializers.CharField(allow_null=True)
    session = serializers.CharField(allow_null=True)
    round = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=MODES)
    identity_verified = serializers.BooleanField()
    policy_version = serializers.IntegerField()
    query = serializers.CharField(allow_blank=True)
    context = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # a field, not Serializer.context
    tokens_used = serializers.IntegerField()
    token_budget = serializers.IntegerField()
    candidates = serializers.IntegerField()
    excluded = serializers.IntegerField()
    reasons = serializers.ListField(
        child=serializers.ChoiceField(choices=REASONS), help_text="Distinct exclusion reasons."
    )
    static_block_cached = serializers.BooleanField()
    created_at = Timestamp()


RetrievalLogPageSerializer = keyset_page("RetrievalLogPage", RetrievalSummarySerializer)


def event_summary(event: RetrievalEvent) -> dict[str, object]:
    return {
        **event_fields(event),
        "id": event.pk,
        "project": event.project.slug,
        "candidates": event.candidate_count,
        "reasons": event.reasons,
    }


class RetrievalLog(GovernanceAPIView):
    @extend_schema(
        responses={200: RetrievalLogPageSerializer},
        parameters=[RetrievalLogQuery],
        summary="The retrieval log, newest first (keyset pages)",
    )
    def get(self, request: Request) -> Response:
        query = valid_query(RetrievalLogQuery, request)
        page = selectors.retrieval_log(
            access.projects_of(request.user),
            query.filters(),
            **query.page(),
        )
        return page_response(
            RetrievalLogPageSerializer, [event_summary(e) for e in page.events], page.next_cursor
        )
