"""Governance API: an agent's policy, its draft, versions, what-if replays and their jobs.

docs/api.md, "Governance API": read the active policy and the draft,
replace the draft, publish, list versions, roll back, start a replay and poll
its job, so a team can keep policies as code. The same services as the
console; policy editors and admins write, every console role reads.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from typing import Any
from uuid import UUID

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance import access
from governance.api.base import GovernanceAPIView
from governance.api.errors import Conflict, TooManyRequests
from governance.api.limits import MAX_POLICY_VERSION
from governance.api.schema import Number, Timestamp, error_response
from governance.models import Agent, ChangeApproval, Job, PolicyDraft, PolicyVersion
from governance.models.jobs import JobStatus
from governance.rules.policy import BOUNDS, ENCODINGS, FACT_KINDS, HELP, PolicySettings
from governance.selectors import policies as selectors
from governance.services import policies as policy_service
from governance.services import replay as replay_service


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, trim_whitespace=True)


class RollbackSerializer(ReasonSerializer):
    version = serializers.IntegerField(
        min_value=1, max_value=MAX_POLICY_VERSION, help_text="The earlier version to bring back."
    )


class ReplaySerializer(serializers.Serializer):
    events = serializers.IntegerField(
        min_value=1,
        max_value=replay_service.MAX_EVENTS,
        help_text="How many of the agent's most recent retrievals to replay under the draft.",
    )


def _policy_field(name: str, default: Any, *, request: bool) -> serializers.Field:
    """One policy field, typed from the design's default and bounded as the service bounds it.

    Requests take any subset (the rest keep the active values); responses carry
    every field. The service still validates the whole draft (relations such
    as confirm_days > recent_days are not expressible here).
    """
    common: dict[str, Any] = {"required": not request, "help_text": HELP[name]}
    low, high = BOUNDS.get(name, (None, None))
    if isinstance(default, bool):
        return serializers.BooleanField(**common)
    if isinstance(default, int):
        return serializers.IntegerField(
            min_value=None if low is None else int(low),
            max_value=None if high is None else int(high),
            **common,
        )
    if isinstance(default, float):
        if request:
            return serializers.FloatField(min_value=low, max_value=high, **common)
        return Number(**common)  # stored as sent: an integral weight stays an integer
    if name == "encoding":
        return serializers.ChoiceField(choices=ENCODINGS, **common)
    return serializers.ListField(child=serializers.ChoiceField(choices=FACT_KINDS), **common)


def _policy_serializer(name: str, *, request: bool, versioned: bool = False) -> type[serializers.Serializer]:
    # DRF orders declared fields by creation, so "version" is created first to come first.
    attrs: dict[str, Any] = {}
    if versioned:
        attrs["version"] = serializers.IntegerField(help_text="The active version's number.")
    defaults = PolicySettings()
    for field in dataclass_fields(PolicySettings):
        if field.name != "extra":
            attrs[field.name] = _policy_field(field.name, getattr(defaults, field.name), request=request)
    return type(name, (serializers.Serializer,), attrs)


PolicySettingsSerializer = _policy_serializer("PolicySettings", request=False)
ActivePolicySerializer = _policy_serializer("ActivePolicy", request=False, versioned=True)
PolicyDraftRequestSerializer = _policy_serializer("PolicyDraftRequest", request=True)


class PolicySerializer(serializers.Serializer):
    active = ActivePolicySerializer()
    draft = PolicySettingsSerializer(allow_null=True, help_text="Null when there is no draft.")


class PolicyVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    active = serializers.BooleanField()
    reason = serializers.CharField()
    created_by = serializers.CharField(allow_null=True)
    created_at = Timestamp()
    rolled_back_from = serializers.IntegerField(allow_null=True)
    settings = PolicySettingsSerializer()


class PolicyVersionsSerializer(serializers.Serializer):
    results = PolicyVersionSerializer(many=True)


class JobParamsSerializer(serializers.Serializer):
    events = serializers.IntegerField(allow_null=True)
    active_version = serializers.IntegerField(allow_null=True)


class JobProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    percent = serializers.IntegerField()


class JobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    project = serializers.CharField()
    agent = serializers.CharField(allow_null=True)
    created_by = serializers.CharField(allow_null=True)
    params = JobParamsSerializer()
    progress = JobProgressSerializer()
    cancel_requested = serializers.BooleanField()
    result = serializers.DictField(
        allow_null=True,
        help_text="The replay's report once finished: events, changed_events, items_added, "
        "items_dropped, added_by_reason, dropped_by_reason, tokens, exclusions, changed.",
    )
    error = serializers.CharField(allow_null=True)
    created_at = Timestamp()
    started_at = Timestamp(allow_null=True)
    finished_at = Timestamp(allow_null=True)


class ApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=[ChangeApproval.POLICY, ChangeApproval.SOURCE_CAPS])
    status = serializers.ChoiceField(choices=[status for status, _ in ChangeApproval.STATUSES])
    widening = serializers.ListField(
        child=serializers.CharField(), help_text="What the change lets through, in plain words."
    )
    reason = serializers.CharField()
    requested_by = serializers.CharField()
    requested_at = Timestamp()


class ApprovalResponseSerializer(serializers.Serializer):
    approval = ApprovalSerializer()
    message = serializers.CharField()


def version_body(version: PolicyVersion, *, active_id: int | None) -> dict[str, Any]:
    return {
        "version": version.version,
        "active": version.pk == active_id,
        "reason": version.reason,
        "created_by": version.created_by.get_username() if version.created_by else None,
        "created_at": version.created_at.isoformat(),
        "rolled_back_from": version.rolled_back_from.version if version.rolled_back_from else None,
        "settings": version.settings,
    }


def policy_body(agent: Agent, draft: PolicyDraft | None) -> dict[str, Any]:
    """``{"active": {"version": n, ...fields}, "draft": {...fields} | null}`` (docs/api.md)."""
    assert agent.active_policy is not None, "every agent has an active policy version"
    active = agent.active_policy
    return {
        "active": {"version": active.version, **active.policy.to_dict()},
        "draft": draft.policy.to_dict() if draft else None,
    }


def job_body(job: Job) -> dict[str, Any]:
    total = job.progress_total
    return {
        "id": str(job.pk),
        "kind": job.kind,
        "status": job.status,
        "project": job.project.slug,
        "agent": job.agent.slug if job.agent else None,
        "created_by": job.created_by.get_username() if job.created_by else None,
        "params": {"events": job.params.get("events"), "active_version": job.params.get("active_version")},
        "progress": {
            "done": job.progress_done,
            "total": total,
            "percent": round(100 * job.progress_done / total) if total else 0,
        },
        "cancel_requested": job.cancel_requested,
        "result": job.result,
        "error": job.error or None,
        "created_at": job.created_at.isoformat(),
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


class _AgentPolicyView(GovernanceAPIView):
    write_roles = access.POLICY_EDIT_ROLES

    def get_agent(self, request: Request, project: str, agent: str) -> Agent:
        # The agent's project first: another project's agent is a 404 whatever the body
        # says (R1); then the role there (reads: any role; changes: the policy editor's).
        obj = get_object_or_404(selectors.agent(access.projects_of(request.user), project, agent))
        self.check(request, obj.project_id)
        return obj


def approval_body(approval: ChangeApproval) -> dict[str, Any]:
    return {
        "approval": {
            "id": approval.pk,
            "kind": approval.kind,
            "status": approval.status,
            "widening": approval.widening,
            "reason": approval.reason,
            "requested_by": approval.requested_by.get_username(),
            "requested_at": approval.requested_at.isoformat(),
        },
        "message": APPROVAL_MESSAGES[approval.status],
    }


APPROVAL_MESSAGES = {
    "pending": "Waiting for a second administrator of this project to approve the change.",
    "approved": "Approved and applied.",
    "rejected": "Rejected; nothing changed.",
    "stale": "Not applied: the policy changed since this was asked for. Save and publish the draft again.",
}


def _policy_error(exc: policy_service.PolicyError) -> Exception:
    """Bad input is 400 with field errors; a state that forbids the change is 409."""
    if isinstance(exc, policy_service.InvalidPolicy):
        return serializers.ValidationError(exc.errors)
    if isinstance(exc, policy_service.NeedsAdmin):
        return exceptions.PermissionDenied(str(exc))
    if exc.field:
        return serializers.ValidationError({exc.field: [str(exc)]})
    return Conflict(str(exc))


class PolicyView(_AgentPolicyView):
    @extend_schema(responses={200: PolicySerializer}, summary="The active policy version and the draft")
    def get(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        return Response(PolicySerializer(policy_body(obj, selectors.draft_of(obj))).data)


class PolicyDraftView(_AgentPolicyView):
    @extend_schema(
        request=PolicyDraftRequestSerializer,
        responses={
            200: PolicySerializer,
            400: error_response(
                400, "A field is unknown, of the wrong type, out of bounds, or inconsistent with another."
            ),
        },
        summary="Replace the draft: any subset of the policy fields; the rest keep the active values",
    )
    def put(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        if not isinstance(request.data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Send a JSON object of policy fields."]})
        try:
            policy_service.save_draft(obj, request.data, user=request.user)
        except policy_service.PolicyError as exc:
            raise _policy_error(exc) from exc
        obj.refresh_from_db()
        return Response(PolicySerializer(policy_body(obj, selectors.draft_of(obj))).data)

    @extend_schema(responses={204: None}, summary="Discard the draft")
    def delete(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        policy_service.discard_draft(obj, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicyPublishView(_AgentPolicyView):
    @extend_schema(
        request=ReasonSerializer,
        responses={
            201: PolicyVersionSerializer,
            202: ApprovalResponseSerializer,
            403: error_response(
                403, "The role may not publish here, or only an administrator may publish this change."
            ),
            409: error_response(
                409,
                "There is no draft, the active version changed since it was saved, "
                "or it equals the active version.",
            ),
        },
        summary="Publish the draft as a new immutable version",
        description="201 with the new version; 202 when the project asks a second administrator "
        "to approve a change that widens what becomes memory.",
    )
    def post(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            version = policy_service.publish_draft(obj, body.validated_data["reason"], user=request.user)
        except policy_service.PolicyError as exc:
            raise _policy_error(exc) from exc
        if isinstance(version, ChangeApproval):
            # The project asks a second administrator to approve changes like this one.
            return Response(
                ApprovalResponseSerializer(approval_body(version)).data, status=status.HTTP_202_ACCEPTED
            )
        return Response(
            PolicyVersionSerializer(version_body(version, active_id=version.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class PolicyRollbackView(_AgentPolicyView):
    @extend_schema(
        request=RollbackSerializer,
        responses={
            201: PolicyVersionSerializer,
            403: error_response(
                403, "The role may not roll back here, or only an administrator may make this change."
            ),
            409: error_response(
                409,
                "That version equals the active one, or the project asks a second administrator "
                "to approve this change (publish it as a draft instead).",
            ),
        },
        summary="Roll back: a new version equal to an earlier one",
    )
    def post(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        body = RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            version = policy_service.rollback(obj, data["version"], data["reason"], user=request.user)
        except policy_service.PolicyError as exc:
            raise _policy_error(exc) from exc
        return Response(
            PolicyVersionSerializer(version_body(version, active_id=version.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class PolicyVersionsView(_AgentPolicyView):
    @extend_schema(
        responses={200: PolicyVersionsSerializer},
        summary="Every version, newest first, with who, when and why",
    )
    def get(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        versions = selectors.versions(obj)
        body = {"results": [version_body(v, active_id=obj.active_policy_id) for v in versions]}
        return Response(PolicyVersionsSerializer(body).data)


class PolicyReplayView(_AgentPolicyView):
    @extend_schema(
        request=ReplaySerializer,
        responses={
            202: JobSerializer,
            409: error_response(409, "There is no draft to replay."),
            429: error_response(
                429,
                "Rate limited (`rate_limited`, with Retry-After), or too many replays are already "
                "running (`too_many_requests`).",
            ),
        },
        summary="Replay the last N retrievals under the draft; answers the job to poll",
    )
    def post(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        body = ReplaySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            job = replay_service.start_replay(obj, body.validated_data["events"], user=request.user)
        except replay_service.DraftRequired as exc:
            raise Conflict(str(exc)) from exc
        except replay_service.TooManyReplays as exc:
            raise TooManyRequests(str(exc)) from exc
        except replay_service.ReplayError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": [str(exc)]}) from exc
        job = selectors.job(access.projects_of(request.user), job.pk).get()
        response = Response(JobSerializer(job_body(job)).data, status=status.HTTP_202_ACCEPTED)
        response["Location"] = f"/api/v1/admin/jobs/{job.pk}"
        return response


class JobView(GovernanceAPIView):
    write_roles = access.POLICY_EDIT_ROLES

    @extend_schema(responses={200: JobSerializer}, summary="A background job's progress and result")
    def get(self, request: Request, job_id: UUID) -> Response:
        job = get_object_or_404(selectors.job(access.projects_of(request.user), job_id))
        self.check(request, job.project_id)
        return Response(JobSerializer(job_body(job)).data)


class JobCancelView(GovernanceAPIView):
    write_roles = access.POLICY_EDIT_ROLES

    @extend_schema(request=None, responses={200: JobSerializer}, summary="Cancel a queued or running job")
    def post(self, request: Request, job_id: UUID) -> Response:
        job = get_object_or_404(selectors.job(access.projects_of(request.user), job_id))
        self.check(request, job.project_id)
        replay_service.request_cancel(job, user=request.user)
        job = selectors.job(access.projects_of(request.user), job_id).get()
        return Response(JobSerializer(job_body(job)).data)


class ApprovalDecisionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["approve", "reject"])
    reason = serializers.CharField(max_length=2000)


class ApprovalDecisionView(GovernanceAPIView):
    """A second administrator approves or rejects a waiting change that widens what becomes memory."""

    write_roles = access.ADMIN_ROLES

    @extend_schema(
        request=ApprovalDecisionSerializer,
        responses={
            200: ApprovalResponseSerializer,
            409: error_response(
                409, "The change was already decided, or the administrator deciding it is the one who asked."
            ),
        },
        summary="Approve or reject a change waiting for a second administrator",
    )
    def post(self, request: Request, approval_id: int) -> Response:
        approval = get_object_or_404(selectors.approvals(access.projects_of(request.user)), pk=approval_id)
        self.check(request, approval.project_id)
        body = ApprovalDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            decided = policy_service.decide_approval(
                approval.pk,
                approve=body.validated_data["action"] == "approve",
                reason=body.validated_data["reason"],
                user=request.user,
            )
        except policy_service.PolicyError as exc:
            raise _policy_error(exc) from exc
        return Response(ApprovalResponseSerializer(approval_body(decided)).data)
