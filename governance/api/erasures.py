"""Forgetting a person through the API: agents (``forget`` scope) and people (roles that may withdraw).

``POST .../principals/{external_id}/forget`` answers 202 with a job, or with
``"dry_run": true`` 200 with what would be erased; ``GET`` the job for its
progress and, once done, the receipt.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from governance import access
from governance.api.base import AgentAPIView, GovernanceAPIView
from governance.api.schema import error_response
from governance.models import Job, Principal, Project
from governance.models.credentials import KeyScope
from governance.selectors import erasures as selectors
from governance.services import erasure as erasure_service


class ForgetSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=erasure_service.MAX_REASON,
        trim_whitespace=True,
        help_text="Why this person is forgotten (for example the request's ticket). It is kept in the "
        "audit trail for good, so it must not repeat what is being erased.",
    )
    dry_run = serializers.BooleanField(
        default=False, help_text="True: only count what would be erased; nothing changes."
    )


class FactCountsSerializer(serializers.Serializer):
    preference = serializers.IntegerField()
    profile = serializers.IntegerField()
    incident = serializers.IntegerField()
    tool_instruction = serializers.IntegerField()
    episodic = serializers.IntegerField()
    summary = serializers.IntegerField()
    slot = serializers.IntegerField()
    project_fact = serializers.IntegerField()


class CountsSerializer(serializers.Serializer):
    facts = FactCountsSerializer(help_text="The person's facts by kind, in every status.")
    writes = serializers.IntegerField(help_text="Proposed writes: their text, findings and stored replies.")
    review_decisions = serializers.IntegerField(help_text="Reviewers' notes and edits on those writes.")
    retrieval_events = serializers.IntegerField(
        help_text="Stored retrievals that lose the person's lines and the question asked."
    )
    session_blocks = serializers.IntegerField(help_text="Cached session-start blocks dropped.")
    resume_hints = serializers.IntegerField(help_text="Sessions whose resume hint is erased.")


class DryRunSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    principal = serializers.CharField(help_text="The external id as asked, or the pseudonym once forgotten.")
    counts = CountsSerializer()
    total = serializers.IntegerField()


class ChainPositionSerializer(serializers.Serializer):
    action = serializers.CharField()
    sequence = serializers.IntegerField(
        help_text="Position of the receipt's entry in the project's audit chain."
    )
    entry_hash = serializers.CharField()


class ReceiptSerializer(serializers.Serializer):
    document = serializers.CharField()
    project = serializers.CharField()
    principal = serializers.CharField(help_text="The keyed pseudonym the person is kept under.")
    job = serializers.CharField()
    requested_at = serializers.CharField()
    erased_at = serializers.CharField()
    requested_by = serializers.CharField()
    reason = serializers.CharField()
    counts = CountsSerializer()
    total = serializers.IntegerField()
    nothing_new = serializers.BooleanField(
        help_text="True when an earlier erasure had left nothing to erase."
    )
    tombstones = serializers.ListField(child=serializers.IntegerField())
    retrieval_events_resealed = serializers.ListField(child=serializers.IntegerField())
    audit = ChainPositionSerializer()


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    percent = serializers.IntegerField()


class ErasureJobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "running", "succeeded", "failed", "cancelled"])
    project = serializers.CharField()
    principal = serializers.CharField()
    progress = ProgressSerializer()
    receipt = ReceiptSerializer(allow_null=True)
    error = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


def job_body(job: Job) -> dict[str, Any]:
    total = max(job.progress_total, job.progress_done)
    receipt = (job.result or {}).get("receipt")
    return {
        "id": str(job.pk),
        "kind": job.kind,
        "status": job.status,
        "project": job.project.slug,
        "principal": job.params.get("pseudonym", ""),
        "progress": {
            "done": job.progress_done,
            "total": total,
            "percent": 100
            if job.status == "succeeded"
            else round(100 * job.progress_done / total)
            if total
            else 0,
        },
        "receipt": receipt,
        "error": "The erasure stopped with an error; it resumes when started again." if job.error else None,
        "created_at": job.created_at.isoformat(),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


def _forget(
    request: Request, project: Project, external_id: str, *, actor: str, job_url: str, **who: Any
) -> Response:
    body = ForgetSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    principal: Principal | None = selectors.principal_by_external_id(project, external_id)
    if principal is None:
        raise NotFound("Nobody with this id is known in this project.")
    if body.validated_data["dry_run"]:
        found = selectors.inventory(principal)
        return Response(
            {"dry_run": True, "principal": external_id, "counts": found.counts, "total": found.total}
        )
    try:
        job = erasure_service.start_erasure(
            principal, reason=body.validated_data["reason"], actor=actor, **who
        )
    except erasure_service.ErasureError as exc:
        raise ValidationError({exc.field: [str(exc)]}) from exc
    job = Job.objects.select_related("project").get(pk=job.pk)
    location = reverse(job_url, args=[job.pk])
    return Response(job_body(job), status=status.HTTP_202_ACCEPTED, headers={"Location": location})


FORGET_RESPONSES = {
    200: OpenApiResponse(DryRunSerializer, description="Dry run: what would be erased; nothing changed."),
    202: OpenApiResponse(
        ErasureJobSerializer, description="Queued: GET the job for progress and the receipt."
    ),
    400: error_response(400, "`reason` missing, blank or too long (field errors)."),
    404: error_response(404, "Nobody with this id in the project."),
}
FORGET_DESCRIPTION = (
    "Erases everything held about the person in this project: every fact in every status and kind "
    "(summaries and session working memory included), their writes' text and findings, review notes "
    "and edits, their lines in stored retrievals, cached session blocks and resume hints. Each fact "
    "leaves a tombstone that blocks learning it again, and the person is kept under a keyed pseudonym "
    "so counts and the audit trail stay whole. Asking again erases nothing new and says so."
)


class ForgetPrincipal(AgentAPIView):
    scopes = {"POST": (KeyScope.FORGET, "forget people")}

    @extend_schema(
        request=ForgetSerializer,
        responses=FORGET_RESPONSES,
        summary="Forget a person: erase everything about them (or a dry run)",
        description=FORGET_DESCRIPTION,
    )
    def post(self, request: Request, external_id: str) -> Response:
        agent = self.agent(request)
        return _forget(
            request,
            self.project(request),
            external_id,
            actor=f"agent:{agent.slug}",
            job_url="api-erasure",
            agent=agent,
        )


class ErasureDetail(AgentAPIView):
    scopes = {"GET": (KeyScope.FORGET, "read erasures")}

    @extend_schema(
        responses={
            200: ErasureJobSerializer,
            404: error_response(404, "No such erasure in this project."),
        },
        summary="An erasure's progress and, once done, its receipt",
    )
    def get(self, request: Request, erasure_id: UUID) -> Response:
        projects = Project.objects.filter(pk=self.project(request).pk)
        return Response(job_body(get_object_or_404(selectors.erasure_job(projects, erasure_id))))


class AdminForgetPrincipal(GovernanceAPIView):
    # Forgetting is withdrawal of everything: the roles that may withdraw may do it.
    write_roles = access.REVIEW_ROLES

    @extend_schema(
        request=ForgetSerializer,
        responses={**FORGET_RESPONSES, 403: error_response(403, "Your role here may not withdraw.")},
        summary="Forget a person in a project: erase everything about them (or a dry run)",
        description=FORGET_DESCRIPTION,
    )
    def post(self, request: Request, project: str, external_id: str) -> Response:
        obj = get_object_or_404(access.projects_of(request.user), slug=project)
        self.check(request, obj)
        return _forget(
            request,
            obj,
            external_id,
            actor=f"user:{request.user.get_username()}",
            job_url="api-admin-erasure",
            user=request.user,
        )


class AdminErasureDetail(GovernanceAPIView):
    # Read-only: set so other methods answer 405 after the project check, as JobView does.
    write_roles = access.REVIEW_ROLES

    @extend_schema(
        responses={
            200: ErasureJobSerializer,
            404: error_response(404, "No such erasure in your projects."),
        },
        summary="An erasure's progress and, once done, its receipt",
    )
    def get(self, request: Request, erasure_id: UUID) -> Response:
        job = get_object_or_404(selectors.erasure_job(access.projects_of(request.user), erasure_id))
        self.check(request, job.project_id)
        return Response(job_body(job))
