"""Governance API: an agent's policy, its draft, versions, what-if replays and their jobs.

DESIGN.md "Governance API for people": read the active policy and the draft,
replace the draft, publish, list versions, roll back, start a replay and poll
its job, so a team can keep policies as code. The same services as the
console; policy editors and admins write, every console role reads.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance import access
from governance.api.base import GovernanceAPIView
from governance.api.errors import Conflict, TooManyRequests
from governance.api.limits import MAX_POLICY_VERSION
from governance.models import Agent, ChangeApproval, Job, PolicyDraft, PolicyVersion
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
    """``{"active": {"version": n, ...fields}, "draft": {...fields} | null}`` (DESIGN.md)."""
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
    @extend_schema(responses=OpenApiTypes.OBJECT, summary="The active policy version and the draft")
    def get(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        return Response(policy_body(obj, selectors.draft_of(obj)))


class PolicyDraftView(_AgentPolicyView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
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
        return Response(policy_body(obj, selectors.draft_of(obj)))

    @extend_schema(responses={204: None}, summary="Discard the draft")
    def delete(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        policy_service.discard_draft(obj, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicyPublishView(_AgentPolicyView):
    @extend_schema(
        request=ReasonSerializer,
        responses={201: OpenApiTypes.OBJECT},
        summary="Publish the draft as a new immutable version",
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
            return Response(approval_body(version), status=status.HTTP_202_ACCEPTED)
        return Response(version_body(version, active_id=version.pk), status=status.HTTP_201_CREATED)


class PolicyRollbackView(_AgentPolicyView):
    @extend_schema(
        request=RollbackSerializer,
        responses={201: OpenApiTypes.OBJECT},
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
        return Response(version_body(version, active_id=version.pk), status=status.HTTP_201_CREATED)


class PolicyVersionsView(_AgentPolicyView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT, summary="Every version, newest first, with who, when and why"
    )
    def get(self, request: Request, project: str, agent: str) -> Response:
        obj = self.get_agent(request, project, agent)
        versions = (
            PolicyVersion.objects.filter(agent=obj)
            .select_related("created_by", "rolled_back_from")
            .order_by("-version")
        )
        return Response({"results": [version_body(v, active_id=obj.active_policy_id) for v in versions]})


class PolicyReplayView(_AgentPolicyView):
    @extend_schema(
        request=ReplaySerializer,
        responses={202: OpenApiTypes.OBJECT},
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
        job = Job.objects.select_related("agent", "project", "created_by").get(pk=job.pk)
        response = Response(job_body(job), status=status.HTTP_202_ACCEPTED)
        response["Location"] = f"/api/v1/admin/jobs/{job.pk}"
        return response


class JobView(GovernanceAPIView):
    write_roles = access.POLICY_EDIT_ROLES

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="A background job's progress and result")
    def get(self, request: Request, job_id: UUID) -> Response:
        job = get_object_or_404(selectors.job(access.projects_of(request.user), job_id))
        self.check(request, job.project_id)
        return Response(job_body(job))


class JobCancelView(GovernanceAPIView):
    write_roles = access.POLICY_EDIT_ROLES

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT, summary="Cancel a queued or running job")
    def post(self, request: Request, job_id: UUID) -> Response:
        job = get_object_or_404(selectors.job(access.projects_of(request.user), job_id))
        self.check(request, job.project_id)
        replay_service.request_cancel(job, user=request.user)
        return Response(job_body(selectors.job(access.projects_of(request.user), job_id).get()))


class ApprovalDecisionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["approve", "reject"])
    reason = serializers.CharField(max_length=2000)


class ApprovalDecisionView(GovernanceAPIView):
    """A second administrator approves or rejects a waiting change that widens what becomes memory."""

    write_roles = access.ADMIN_ROLES

    @extend_schema(
        request=ApprovalDecisionSerializer,
        responses={200: OpenApiTypes.OBJECT},
        summary="Approve or reject a change waiting for a second administrator",
    )
    def post(self, request: Request, approval_id: int) -> Response:
        approval = get_object_or_404(
            ChangeApproval.objects.filter(project__in=access.projects_of(request.user)), pk=approval_id
        )
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
        return Response(approval_body(decided))
