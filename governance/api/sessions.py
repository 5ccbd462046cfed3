"""POST /api/v1/sessions/{session}/end (docs/api.md; R9, R12, R17 in docs/rules.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.base import AgentAPIView
from governance.api.errors import Conflict, TooManyPending
from governance.api.schema import Timestamp, error_response
from governance.api.writes import FactRefSerializer, FindingSerializer
from governance.models.credentials import KeyScope
from governance.rules.summaries import MAX_SOURCE_CHARS, MAX_SUMMARY_CHARS
from governance.services import sessions as session_service
from governance.services.writes import ReviewQueueFull

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise  # stubs only: lazy translations

# A resume hint is one or two sentences injected verbatim next session (R9).
MAX_RESUME_HINT_CHARS = 1_000


def _too_long(what: str, limit: int, advice: str) -> dict[str, str | _StrPromise]:
    return {"max_length": f"The {what} can be at most {limit:,} characters. {advice}"}


class EndSessionSerializer(serializers.Serializer):
    # The summary check (R17) runs in this request, so its inputs are bounded
    # to what it reads within its time budget (docs/operations.md, "Limits").
    principal = serializers.CharField(max_length=200)
    summary = serializers.CharField(
        max_length=MAX_SUMMARY_CHARS,
        allow_blank=True,
        error_messages=_too_long("summary", MAX_SUMMARY_CHARS, "Summarise more briefly."),
    )
    resume_hint = serializers.CharField(
        max_length=MAX_RESUME_HINT_CHARS,
        allow_blank=True,
        error_messages=_too_long("resume hint", MAX_RESUME_HINT_CHARS, "Keep it to a sentence or two."),
    )
    first_event = serializers.CharField(max_length=200)
    last_event = serializers.CharField(max_length=200)
    source_text = serializers.CharField(
        max_length=MAX_SOURCE_CHARS,
        required=False,
        allow_null=True,
        allow_blank=True,
        error_messages=_too_long(
            "source text", MAX_SOURCE_CHARS, "Send the part of the conversation the summary covers."
        ),
    )

    def to_request(self) -> session_service.EndRequest:
        data = self.validated_data
        return session_service.EndRequest(
            principal=data["principal"],
            summary=data["summary"],
            resume_hint=data["resume_hint"],
            first_event=data["first_event"],
            last_event=data["last_event"],
            source_text=data.get("source_text") or None,
        )


class DroppedItemSerializer(serializers.Serializer):
    category = serializers.CharField(help_text="What kind of thing was dropped: a name, a number, ...")
    text = serializers.CharField(help_text="The dropped text, quoted from the source text.")
    start = serializers.IntegerField()
    end = serializers.IntegerField()


class SummaryCheckSerializer(serializers.Serializer):
    material = serializers.BooleanField(help_text="True: the summary dropped something and goes to review.")
    dropped = DroppedItemSerializer(many=True)


class SummaryWriteSerializer(serializers.Serializer):
    write_id = serializers.IntegerField()
    status = serializers.CharField()
    fact = FactRefSerializer(allow_null=True)
    findings = FindingSerializer(many=True)
    check = SummaryCheckSerializer(allow_null=True, help_text="Null when no source text was given.")


class SessionEndedSerializer(serializers.Serializer):
    session = serializers.CharField()
    ended_at = Timestamp(allow_null=True)
    resume_hint = serializers.CharField(allow_blank=True)
    resume_hint_findings = FindingSerializer(
        many=True, help_text="Non-empty: the hint looked like an injection and will not be injected."
    )
    slots_ended = serializers.IntegerField(help_text="Working-memory slots of the session that ended.")
    summary = SummaryWriteSerializer(allow_null=True, help_text="Null when the summary was empty.")


class EndSession(AgentAPIView):
    scopes = {"POST": (KeyScope.WRITE, "end sessions")}

    @extend_schema(
        responses={
            200: SessionEndedSerializer,
            409: error_response(409, "The session has already ended."),
            429: error_response(
                429,
                "Rate limited (`rate_limited`, with Retry-After), or the summary would wait for "
                "review and the agent's review queue is full (`review_queue_full`); the session "
                "stays open.",
            ),
        },
        request=EndSessionSerializer,
        summary="End a session with its summary and resume hint",
    )
    def post(self, request: Request, session_id: str) -> Response:
        serializer = EndSessionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            result = session_service.end_session(self.agent(request), session_id, serializer.to_request())
        except session_service.SessionError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        except session_service.SessionAlreadyEnded as exc:
            raise Conflict(str(exc)) from exc
        except ReviewQueueFull as exc:
            # The summary would wait for review; the session stays open (nothing stored).
            raise TooManyPending(str(exc)) from exc
        write = result.write
        return Response(
            SessionEndedSerializer(
                {
                    "session": result.session.external_id,
                    "ended_at": result.session.ended_at.isoformat() if result.session.ended_at else None,
                    "resume_hint": result.session.resume_hint,
                    # Non-empty: the hint looked like an injection (R5) and will not be injected.
                    "resume_hint_findings": [f.to_dict() for f in result.hint_findings],
                    "slots_ended": result.slots_ended,
                    "summary": (
                        {
                            "write_id": write.pk,
                            "status": write.status,
                            "fact": {"id": write.fact.pk, "status": write.fact.status}
                            if write.fact
                            else None,
                            "findings": write.findings,
                            "check": result.check.to_dict() if result.check else None,
                        }
                        if write
                        else None
                    ),
                }
            ).data
        )
