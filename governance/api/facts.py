"""Facts for agents: one fact, a principal's memories, withdrawal on the person's request."""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.base import AgentAPIView
from governance.api.errors import Conflict
from governance.api.schema import Timestamp, error_response
from governance.models import Agent, Fact, Principal
from governance.models.credentials import KeyScope
from governance.rules.retrieval import age_in_days
from governance.selectors import facts as fact_selectors
from governance.services import facts as fact_service


class FactSourceSerializer(serializers.Serializer):
    type = serializers.CharField()
    ref = serializers.CharField()
    observed_at = Timestamp()
    writer = serializers.CharField(help_text="Who wrote it: agent:<slug>, user:<name>, ...")


class FactSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    principal = serializers.CharField(allow_null=True, help_text="Null for a project fact.")
    kind = serializers.CharField()
    key = serializers.CharField(allow_null=True)
    statement = serializers.CharField(allow_blank=True, help_text="Empty once withdrawn (erased).")
    status = serializers.CharField()
    status_reason = serializers.CharField(allow_blank=True)
    source = FactSourceSerializer()  # type: ignore[assignment]  # a declared field, not Field.source
    authority = serializers.IntegerField()
    confidence = serializers.CharField()
    valid_from = Timestamp(allow_null=True)
    valid_to = Timestamp(allow_null=True)
    recorded_at = Timestamp()
    last_verified_at = Timestamp()
    age_days = serializers.IntegerField(help_text="Days since last verified.")
    embedded = serializers.BooleanField()
    token_count = serializers.IntegerField()


class MemorySerializer(FactSerializer):
    tier = serializers.ChoiceField(
        choices=["recent", "confirm", "stale"], help_text="Freshness under the agent's active policy."
    )
    plain_status = serializers.ChoiceField(
        choices=["current", "needs re-confirmation", "outdated"],
        help_text="The tier in words a person understands.",
    )


class PrincipalMemoriesSerializer(serializers.Serializer):
    principal = serializers.CharField()
    memories = MemorySerializer(many=True)
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text='How many memories are "current", "needs re-confirmation" and "outdated".',
    )


class SupersessionLinkSerializer(serializers.Serializer):
    old_fact = serializers.IntegerField()
    old_status = serializers.CharField(allow_null=True)
    new_fact = serializers.IntegerField()
    new_status = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    decided_by = serializers.CharField(allow_blank=True)
    at = Timestamp()


class FactDetailSerializer(FactSerializer):
    supersession_chain = SupersessionLinkSerializer(many=True, help_text="The whole chain, oldest first.")
    supersedes = serializers.ListField(child=serializers.IntegerField())
    superseded_by = serializers.ListField(child=serializers.IntegerField())


class TombstoneSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reason = serializers.CharField()
    actor = serializers.CharField()
    created_at = Timestamp()


class WithdrawnSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["withdrawn"])
    tombstone = TombstoneSerializer()


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


def visible_fact(agent: Agent, fact_id: int) -> Fact:
    """The fact as retrieval scopes it (a slot only to the agent of its session); anything
    else, another project's fact included, is a 404 (R1)."""
    return get_object_or_404(fact_selectors.visible_to_agent(agent).select_related("principal"), pk=fact_id)


class FactDetail(AgentAPIView):
    scopes = {"GET": (KeyScope.READ, "read facts")}

    @extend_schema(
        responses={
            200: FactDetailSerializer,
            404: error_response(
                404, "No such fact in the key's project, or a slot of another agent's session."
            ),
        },
        summary="One fact with provenance and its supersession chain",
    )
    def get(self, request: Request, fact_id: int) -> Response:
        fact = visible_fact(self.agent(request), fact_id)
        body = fact_body(fact)
        chain = fact_selectors.supersession_chain(fact)
        body["supersession_chain"] = [{**asdict(link), "at": link.at.isoformat()} for link in chain]
        # The direct neighbours, for clients that only need "what replaced this".
        body["supersedes"] = [link.old_fact for link in chain if link.new_fact == fact.pk]
        body["superseded_by"] = [link.new_fact for link in chain if link.old_fact == fact.pk]
        return Response(FactDetailSerializer(body).data)


PRINCIPAL_REQUIRED = (
    "Name the person who asked for this to be forgotten: their external id, as in your writes. "
    "An agent withdraws memories about that person only."
)


class WithdrawSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=2000,
        trim_whitespace=True,
        help_text='What the person asked, in a few words; recorded as "On the person\'s request: ...".',
    )
    principal = serializers.CharField(
        max_length=200,
        help_text="External id of the person the fact is about, on whose request it is withdrawn. "
        "Required: a request without it is a 400.",
        error_messages={
            "required": PRINCIPAL_REQUIRED,
            "null": PRINCIPAL_REQUIRED,
            "blank": PRINCIPAL_REQUIRED,
        },
    )


class FactWithdraw(AgentAPIView):
    scopes = {"POST": (KeyScope.FORGET, "withdraw facts")}

    @extend_schema(
        request=WithdrawSerializer,
        responses={
            200: WithdrawnSerializer,
            400: error_response(400, "`reason` or `principal` missing or invalid (field errors)."),
            403: error_response(
                403,
                "The key lacks the forget scope (`missing_scope`), or the fact is not an agent's to "
                "withdraw: a project fact (`project_fact`), configuration (`configuration`), or a "
                "memory waiting for or rejected by a reviewer (`under_review`).",
            ),
            404: error_response(
                404, "No such fact visible to this key, or it is not about the named person."
            ),
            409: error_response(409, "Already withdrawn."),
        },
        summary="Withdraw a fact on the request of the person it is about",
        description="Erases the statement from every copy about that person and leaves a tombstone "
        "that blocks learning it again. Copies that were held back or rejected by review stay for a "
        'reviewer to decide. Body: `{"reason": ..., "principal": <external id>}`; the principal '
        "is required.",
    )
    def post(self, request: Request, fact_id: int) -> Response:
        agent = self.agent(request)
        # Scoped before validation: an id this key cannot see is a 404 whatever the body says (R1).
        fact = visible_fact(agent, fact_id)
        serializer = WithdrawSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        # Naming someone else reveals nothing: the same 404 as an unknown id.
        if fact.principal is not None and fact.principal.external_id != data["principal"]:
            raise NotFound()
        try:
            tombstone = fact_service.withdraw_on_request(agent, fact, reason=data["reason"])
        except fact_service.WithdrawalRefused as exc:
            raise PermissionDenied(str(exc), code=exc.code) from exc
        except fact_service.FactStateError as exc:
            raise Conflict(str(exc)) from exc
        body = {
            "id": fact.pk,
            "status": "withdrawn",
            "tombstone": {
                "id": tombstone.pk,
                "reason": tombstone.reason,
                "actor": tombstone.actor,
                "created_at": tombstone.created_at.isoformat(),
            },
        }
        return Response(WithdrawnSerializer(body).data)


class DisputeSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=fact_service.MAX_DISPUTE_CHARS,
        trim_whitespace=True,
        help_text="The person's own words: what is wrong or outdated. A reviewer reads them.",
    )
    principal = serializers.CharField(
        max_length=200,
        help_text="External id of the person the fact is about, who disputes it.",
    )


class DisputeResponseSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The disputed fact.")
    status = serializers.CharField(help_text="pending_review: out of every context until a reviewer decides.")
    confidence = serializers.CharField()
    review_write = serializers.IntegerField(help_text="The review-queue item carrying the person's words.")


class FactDispute(AgentAPIView):
    scopes = {"POST": (KeyScope.FORGET, "dispute facts")}

    @extend_schema(
        request=DisputeSerializer,
        responses={
            200: DisputeResponseSerializer,
            400: error_response(400, "`reason` or `principal` missing or invalid."),
            404: error_response(
                404,
                "No such fact visible to this key, or it is not about the named person "
                "(project facts are not a person's to dispute).",
            ),
            409: error_response(409, "Not current memory (already disputed, ended)."),
        },
        summary="The person says a memory about them is wrong or outdated",
        description="The fact is kept out of every context until a reviewer decides, and joins the review "
        "queue with the person's words. Approval keeps it; rejection takes it out of memory.",
    )
    def post(self, request: Request, fact_id: int) -> Response:
        agent = self.agent(request)
        fact = visible_fact(agent, fact_id)
        serializer = DisputeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if fact.principal is None or fact.principal.external_id != data["principal"]:
            raise NotFound()
        try:
            write = fact_service.dispute_fact(agent, fact, words=data["reason"])
        except fact_service.FactStateError as exc:
            raise Conflict(str(exc)) from exc
        body = {"id": fact.pk, "status": "pending_review", "confidence": "disputed", "review_write": write.pk}
        return Response(DisputeResponseSerializer(body).data)


# The person's own words for the freshness tiers (R9): what "what do you remember
# about me" shows them.
PLAIN_STATUS = {"recent": "current", "confirm": "needs re-confirmation", "stale": "outdated"}


class PrincipalMemories(AgentAPIView):
    scopes = {"GET": (KeyScope.READ, "read memories")}

    @extend_schema(
        responses={200: PrincipalMemoriesSerializer},
        summary="What the agent currently believes about this person",
    )
    def get(self, request: Request, external_id: str) -> Response:
        principal = get_object_or_404(Principal, project=self.project(request), external_id=external_id)
        agent = self.agent(request)
        assert agent.active_policy is not None
        policy = agent.active_policy.policy
        facts = fact_selectors.active_memories(principal)
        memories = []
        for fact in facts:
            body = fact_body(fact, policy_tiers=(policy.recent_days, policy.confirm_days))
            # Added to the documented contract (docs/api.md), never replacing a field:
            # a plain status a person reads.
            body["plain_status"] = PLAIN_STATUS[str(body["tier"])]
            memories.append(body)
        counts = {plain: 0 for plain in PLAIN_STATUS.values()}
        for body in memories:
            counts[str(body["plain_status"])] += 1
        payload = {"principal": principal.external_id, "memories": memories, "counts": counts}
        return Response(PrincipalMemoriesSerializer(payload).data)
