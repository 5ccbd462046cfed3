"""GET /api/v1/admin/audit and /api/v1/admin/audit/export: the history for scripts (docs/api.md).

The same selectors and the same streamed export as the auditors' console,
scoped to the token user's projects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from governance import access
from governance.api.base import (
    CursorField,
    GovernanceAPIView,
    KeysetQuery,
    check_period,
    keyset_page,
    page_response,
    valid_query,
)
from governance.api.limits import db_id
from governance.api.schema import Timestamp
from governance.exports import export_response
from governance.rules.export import FORMATS
from governance.selectors import audit as selectors


class HistoryQuery(serializers.Serializer):
    actor = serializers.CharField(required=False, max_length=200, help_text="user:<name>, agent:<slug>, ...")
    action = serializers.CharField(
        required=False, max_length=64, help_text="An action (fact.withdrawn), a family (fact) or retrieval."
    )
    since = serializers.DateTimeField(required=False, help_text="Inclusive, ISO 8601.")
    until = serializers.DateTimeField(required=False, help_text="Exclusive, ISO 8601.")
    principal = serializers.CharField(required=False, max_length=200, help_text="Principal external id.")
    fact = db_id(required=False)
    project = serializers.CharField(required=False, max_length=64, help_text="Project slug.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return check_period(attrs)

    def filters(self) -> selectors.HistoryFilters:
        data = self.validated_data
        return selectors.HistoryFilters(
            actor=data.get("actor"),
            action=data.get("action"),
            since=data.get("since"),
            until=data.get("until"),
            principal=data.get("principal"),
            fact=data.get("fact"),
            project=data.get("project"),
        )


class HistoryPageQuery(HistoryQuery, KeysetQuery):
    cursor = CursorField(selectors.decode_cursor)


class ExportQuery(HistoryQuery):
    format = serializers.ChoiceField(choices=FORMATS, required=False, default="jsonl")


class HistoryRowSerializer(serializers.Serializer):
    # DRF moves declared fields off the class: these do not shadow Field.source or Serializer.data.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["audit", "retrieval"], help_text="An audit entry or a retrieval event."
    )
    id = serializers.IntegerField()
    project = serializers.CharField()
    sequence = serializers.IntegerField(allow_null=True, help_text="Position in the project's audit chain.")
    created_at = Timestamp()
    actor = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField(allow_blank=True)
    object_id = serializers.CharField(allow_blank=True)
    principal = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    # DRF moves declared fields off the class, so this does not shadow Serializer.data.
    data = serializers.DictField(  # type: ignore[assignment]
        help_text="What the entry records; its keys depend on the action (fact.withdrawn, ...)."
    )
    request_id = serializers.CharField(allow_blank=True)
    previous_hash = serializers.CharField(allow_blank=True)
    entry_hash = serializers.CharField(allow_blank=True)


HistoryPageSerializer = keyset_page("HistoryPage", HistoryRowSerializer)


class AuditHistory(GovernanceAPIView):
    @extend_schema(
        responses={200: HistoryPageSerializer},
        parameters=[HistoryPageQuery],
        summary="The audit history and retrievals, newest first",
    )
    def get(self, request: Request) -> Response:
        query = valid_query(HistoryPageQuery, request)
        page = selectors.history_page(
            access.projects_of(request.user),
            query.filters(),
            **query.page(),
        )
        return page_response(
            HistoryPageSerializer, [item.export_row() for item in page.items], page.next_cursor
        )


class _IgnoreFormatParameter(DefaultContentNegotiation):
    """``?format=`` names the export's format here, not a DRF renderer; errors stay JSON."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


class AuditExport(GovernanceAPIView):
    content_negotiation_class = _IgnoreFormatParameter

    @extend_schema(
        parameters=[ExportQuery],
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV, streamed (format=csv)"),
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.STR, description="JSON Lines, one row per line, streamed (format=jsonl)"
            ),
        },
        summary="Export the audit history (streamed, oldest first)",
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = ExportQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        return export_response(
            access.projects_of(request.user), query.filters(), query.validated_data["format"]
        )
