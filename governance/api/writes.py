"""POST /api/v1/writes and GET /api/v1/writes/{id} (docs/api.md)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.base import AgentAPIView, represent, validated
from governance.api.errors import Conflict, SourceForbidden, TooManyPending, _flatten
from governance.api.limits import db_id
from governance.api.schema import Number, Timestamp, error_response
from governance.models import Write
from governance.models.credentials import KeyScope
from governance.models.facts import FactKind, SourceType
from governance.models.writes import WriteStatus
from governance.rules.provenance import REF_MAX_CHARS
from governance.rules.text import MAX_STATEMENT_CHARS
from governance.services import writes as write_service

KEY_PATTERN = re.compile(r"^[A-Za-z0-9_.:\-/]+$")
# Clock skew we accept on observed_at; later than this is a bad timestamp.
FUTURE_SKEW = timedelta(minutes=5)


class SourceSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=SourceType.choices)
    ref = serializers.CharField(max_length=REF_MAX_CHARS, trim_whitespace=True)
    observed_at = serializers.DateTimeField()

    def validate_observed_at(self, value: datetime) -> datetime:
        if value > timezone.now() + FUTURE_SKEW:
            raise serializers.ValidationError("observed_at cannot be in the future.")
        return value


class WriteRequestSerializer(serializers.Serializer):
    principal = serializers.CharField(max_length=200, allow_null=True, required=True)
    kind = serializers.ChoiceField(choices=FactKind.values)
    key = serializers.CharField(max_length=200, required=False, allow_null=True, allow_blank=False)
    statement = serializers.CharField(max_length=MAX_STATEMENT_CHARS, trim_whitespace=True)
    source = SourceSerializer()  # type: ignore[assignment]  # nested serializer; the stubs type fields as str
    authority = serializers.IntegerField(min_value=1, max_value=5, required=False, allow_null=True)
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_to = serializers.DateTimeField(required=False, allow_null=True)
    session = serializers.CharField(max_length=200, required=False, allow_null=True)
    derived_from_retrieval = db_id(required=False, allow_null=True)

    def validate_key(self, value: str | None) -> str | None:
        if value is not None and not KEY_PATTERN.match(value):
            raise serializers.ValidationError(
                "Use letters, digits and _ . : - / only (e.g. deployment_region)."
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, str] = {}
        if attrs.get("valid_from") and attrs.get("valid_to") and attrs["valid_from"] >= attrs["valid_to"]:
            errors["valid_to"] = "valid_to must be after valid_from."
        if attrs["kind"] == "slot" and not attrs.get("session"):
            errors["session"] = "A slot belongs to one session: give the session id."
        if attrs["kind"] == "slot" and attrs.get("principal") is None:
            errors["principal"] = "A slot is working memory about a principal: give the principal."
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    @staticmethod
    def to_request(data: dict[str, Any]) -> write_service.WriteRequest:
        """The service's request for this serializer's validated data."""
        return write_service.WriteRequest(
            principal=data["principal"],
            kind=data["kind"],
            key=data.get("key"),
            statement=data["statement"],
            source_type=data["source"]["type"],
            source_ref=data["source"]["ref"],
            source_observed_at=data["source"]["observed_at"],
            authority=data.get("authority"),
            valid_from=data.get("valid_from"),
            valid_to=data.get("valid_to"),
            session=data.get("session"),
            derived_from_retrieval=data.get("derived_from_retrieval"),
        )


class NearestAttackSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The known attack the statement read most like.")
    category = serializers.CharField(help_text="Its kind, in plain words.")
    similarity = Number(help_text="Cosine similarity, 0-1.")


class FindingSerializer(serializers.Serializer):
    check = serializers.CharField()
    severity = serializers.CharField()
    detail = serializers.CharField()
    # Optional, added by the write guard for reviewers and the console.
    category = serializers.CharField(required=False, help_text="The kind of problem, in plain words.")
    evidence = serializers.CharField(
        required=False,
        help_text="The quoted text, hidden characters shown as markers such as \u27e6U+200B\u27e7.",
    )
    span = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="[start, end) of the evidence in the field's text.",
    )
    field = serializers.CharField(required=False, help_text="statement, source_ref or key.")
    nearest = NearestAttackSerializer(required=False, help_text="The closest known attack.")


class FactRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()


class WriteCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=WriteStatus.choices)
    fact = FactRefSerializer(allow_null=True)
    findings = FindingSerializer(many=True)
    supersedes = serializers.ListField(child=serializers.IntegerField())


class SourceOutSerializer(serializers.Serializer):
    type = serializers.CharField()
    ref = serializers.CharField()
    observed_at = Timestamp()


class DecisionOutSerializer(serializers.Serializer):
    action = serializers.CharField()
    reason = serializers.CharField()
    reviewer = serializers.CharField()
    statement = serializers.CharField(allow_null=True, help_text="The edited statement, if edited.")
    created_at = Timestamp()


class WriteDetailSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=WriteStatus.choices, help_text="Where the write is now.")
    outcome = serializers.ChoiceField(choices=WriteStatus.choices, help_text="What the write guard decided.")
    principal = serializers.CharField(allow_null=True)
    kind = serializers.CharField()
    key = serializers.CharField(allow_null=True)
    statement = serializers.CharField()
    source = SourceOutSerializer()  # type: ignore[assignment]  # a declared field, not Field.source
    authority = serializers.IntegerField()
    requested_authority = serializers.IntegerField(allow_null=True)
    valid_from = Timestamp(allow_null=True)
    valid_to = Timestamp(allow_null=True)
    session = serializers.CharField(allow_null=True)
    derived_from_retrieval = serializers.IntegerField(allow_null=True)
    findings = FindingSerializer(many=True)
    decisions = DecisionOutSerializer(many=True)
    fact = FactRefSerializer(allow_null=True)
    conflicts_with = serializers.IntegerField(allow_null=True)
    supersedes = serializers.ListField(child=serializers.IntegerField())
    created_at = Timestamp()


def write_fields(write: Write) -> dict[str, object]:
    """What a review queue row and a write's detail both say about a write."""
    return {
        "id": write.pk,
        "status": write.status,
        "principal": write.principal.external_id if write.principal else None,
        "kind": write.kind,
        "key": write.key,
        "statement": write.statement,
        "source": {
            "type": write.source_type,
            "ref": write.source_ref,
            "observed_at": write.source_observed_at.isoformat(),
        },
        "authority": write.authority,
        "findings": write.findings,
        "conflicts_with": write.conflicts_with_id,
        "created_at": write.created_at.isoformat(),
    }


def write_detail(write: Write) -> dict[str, object]:
    """The body of GET /writes/{id} and of a review decision (WriteDetailSerializer)."""
    supersedes = list(write.fact.supersedes.values_list("old_fact_id", flat=True)) if write.fact else []
    return {
        **write_fields(write),
        "outcome": write.outcome,
        "requested_authority": write.requested_authority,
        "valid_from": write.valid_from.isoformat() if write.valid_from else None,
        "valid_to": write.valid_to.isoformat() if write.valid_to else None,
        "session": write.session.external_id if write.session else None,
        "derived_from_retrieval": write.derived_from_retrieval_id,
        # Every decision in order, an undone one and its undo included (append-only).
        "decisions": [
            {
                "action": decision.action,
                "reason": decision.reason,
                "reviewer": decision.reviewer.get_username(),
                "statement": decision.edited_statement or None,
                "created_at": decision.created_at.isoformat(),
            }
            for decision in sorted(write.decisions.all(), key=lambda d: d.sequence)
        ],
        "fact": {"id": write.fact.pk, "status": write.fact.status} if write.fact else None,
        "supersedes": supersedes,
    }


class WriteListCreate(AgentAPIView):
    scopes = {"POST": (KeyScope.WRITE, "propose memory writes")}

    @extend_schema(
        request=WriteRequestSerializer,
        responses={
            201: WriteCreatedSerializer,
            403: error_response(
                403,
                "The key lacks the write scope (`missing_scope`), or this agent may not claim the "
                "source type (`source_not_allowed`; `fields` lists the types it may use).",
            ),
            409: error_response(
                409, "The Idempotency-Key was used before with a different body; nothing was written."
            ),
            429: error_response(
                429,
                "Rate limited (`rate_limited`, with Retry-After), or the agent already has as many "
                "writes waiting for review as it may (`review_queue_full`).",
            ),
        },
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="Up to 200 characters: the same key and body answer the first response.",
            )
        ],
        summary="Propose a memory write",
    )
    def post(self, request: Request) -> Response:
        data = validated(WriteRequestSerializer, request.data)
        key = request.headers.get("Idempotency-Key") or None
        if key is not None and len(key) > 200:
            raise serializers.ValidationError({"Idempotency-Key": ["At most 200 characters."]})
        try:
            write = write_service.submit_write(
                self.agent(request), WriteRequestSerializer.to_request(data), idempotency_key=key
            )
        except write_service.SourceNotAllowed as exc:
            raise SourceForbidden(str(exc), {"source.type": list(exc.allowed)}) from exc
        except write_service.IdempotencyConflict as exc:
            raise Conflict(str(exc)) from exc
        except write_service.UnknownReference as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        except write_service.ReviewQueueFull as exc:
            raise TooManyPending(str(exc)) from exc
        return Response(represent(WriteCreatedSerializer, write.response), status=status.HTTP_201_CREATED)


class WriteBatchRequestSerializer(serializers.Serializer):
    """The documented body: up to 500 writes, each shaped like POST /api/v1/writes."""

    writes = WriteRequestSerializer(many=True, help_text="Up to 500 writes, each checked on its own.")


class _BatchEnvelopeSerializer(serializers.Serializer):
    # Parsed loosely on purpose: one malformed write is refused on its own
    # line, it does not turn the other 499 away.
    writes = serializers.ListField(
        child=serializers.JSONField(), min_length=1, max_length=write_service.MAX_BATCH, allow_empty=False
    )


class ItemErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    # DRF moves declared fields off the class, so this does not shadow Serializer.fields.
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))  # type: ignore[assignment]


class BatchItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Position of the write in the request, from 0.")
    status = serializers.IntegerField(
        help_text="What POST /api/v1/writes would have answered: 201, or 400, 403 or 429."
    )
    write = WriteCreatedSerializer(allow_null=True, help_text="The write as submitted; null when refused.")
    error = ItemErrorSerializer(allow_null=True, help_text="Why it was refused; null when submitted.")


class WriteBatchResponseSerializer(serializers.Serializer):
    results = BatchItemSerializer(many=True)
    submitted = serializers.IntegerField()
    refused = serializers.IntegerField()


def _refusal(exc: Exception) -> tuple[int, dict[str, object]]:
    """The status and error a single write refused this way would have had."""
    if isinstance(exc, write_service.SourceNotAllowed):
        return 403, {
            "code": "source_not_allowed",
            "message": str(exc),
            "fields": {"source.type": list(exc.allowed)},
        }
    if isinstance(exc, write_service.ReviewQueueFull):
        return 429, {"code": "review_queue_full", "message": str(exc), "fields": {}}
    if isinstance(exc, write_service.UnknownReference):
        return 400, {"code": "invalid", "message": str(exc), "fields": {exc.field: [str(exc)]}}
    raise exc


class WriteBatch(AgentAPIView):
    scopes = {"POST": (KeyScope.WRITE, "propose memory writes")}

    @extend_schema(
        request=WriteBatchRequestSerializer,
        responses={200: WriteBatchResponseSerializer},
        summary="Propose up to 500 memory writes in one transaction (imports)",
        description=(
            "Each write is checked exactly as POST /api/v1/writes checks it and gets its own "
            "outcome; a write the service refuses stores nothing and does not stop the others. "
            "A malformed write (a field of the wrong type, missing or too long) makes the whole "
            "batch a 400 naming writes.<index>.<field>, and nothing is stored. The whole batch "
            "commits together. Idempotency-Key is not honoured here."
        ),
    )
    def post(self, request: Request) -> Response:
        envelope = _BatchEnvelopeSerializer(data=request.data)
        envelope.is_valid(raise_exception=True)
        # Malformed input is the client's bug: the whole batch is a 400 naming each
        # bad field (writes.<index>.<field>) and nothing is stored, as for a single
        # write. Per-write outcomes are for what the service decides (the guard,
        # source claims, the review queue's limit), never for broken JSON.
        requests: list[write_service.WriteRequest] = []
        errors: dict[str, list[str]] = {}
        for index, item in enumerate(envelope.validated_data["writes"]):
            if not isinstance(item, dict):
                errors[f"writes.{index}"] = ["Each write must be a JSON object."]
                continue
            try:
                data = validated(WriteRequestSerializer, item)
            except serializers.ValidationError as exc:
                for field, messages in _flatten(exc.detail).items():
                    errors[f"writes.{index}.{field}"] = messages
                continue
            requests.append(WriteRequestSerializer.to_request(data))
        if errors:
            raise serializers.ValidationError(errors)
        results: list[dict[str, object] | None] = [None] * len(requests)
        valid = list(enumerate(requests))
        outcomes = write_service.submit_batch(self.agent(request), [r for _, r in valid])
        for (index, _), outcome in zip(valid, outcomes, strict=True):
            if outcome.write is not None:
                results[index] = {
                    "index": index,
                    "status": 201,
                    "write": outcome.write.response,
                    "error": None,
                }
            else:
                assert outcome.refusal is not None
                code, error = _refusal(outcome.refusal)
                results[index] = {"index": index, "status": code, "write": None, "error": error}
        submitted = sum(1 for r in results if r is not None and r["status"] == 201)
        return Response({"results": results, "submitted": submitted, "refused": len(results) - submitted})


class WriteDetail(AgentAPIView):
    scopes = {"GET": (KeyScope.READ, "read writes")}

    @extend_schema(
        responses={200: WriteDetailSerializer}, summary="A write, its findings, decisions and fact"
    )
    def get(self, request: Request, write_id: int) -> Response:
        write = get_object_or_404(
            Write.objects.select_related("principal", "session", "fact").prefetch_related(
                "decisions__reviewer"
            ),
            pk=write_id,
            project=self.project(request),
        )
        return Response(represent(WriteDetailSerializer, write_detail(write)))
