from django.urls import path, register_converter

from governance.api import attribution, erasures, facts, keys, retrievals, sessions, writes
from governance.api import policies as policy_api
from governance.api.admin_retrievals import RetrievalLog as AdminRetrievalLog
from governance.api.audit import AuditExport, AuditHistory
from governance.api.limits import DbIdConverter, ExternalIdConverter
from governance.api.reviews import ReviewDecisionView, ReviewQueue

# Path parameters are checked here, once: an id beyond bigint, or an external
# id that is too long or holds control characters, matches no URL (404 JSON)
# instead of reaching the database (a 500).
register_converter(DbIdConverter, "id")
register_converter(ExternalIdConverter, "extid")

# An agent's policy in the governance API (issue 5).
POLICY = "admin/projects/<slug:project>/agents/<slug:agent>/policy"

urlpatterns = [
    path("key", keys.KeyInfo.as_view(), name="api-key"),
    path("writes", writes.WriteListCreate.as_view(), name="api-writes"),
    path("writes/batch", writes.WriteBatch.as_view(), name="api-writes-batch"),
    path("writes/<id:write_id>", writes.WriteDetail.as_view(), name="api-write"),
    path("retrieve", retrievals.Retrieve.as_view(), name="api-retrieve"),
    path("retrievals/<id:retrieval_id>", retrievals.RetrievalDetail.as_view(), name="api-retrieval"),
    path(
        "retrievals/<id:retrieval_id>/feedback",
        retrievals.RetrievalFeedbackView.as_view(),
        name="api-retrieval-feedback",
    ),
    path("principals/<extid:external_id>/memories", facts.PrincipalMemories.as_view(), name="api-memories"),
    path("principals/<extid:external_id>/forget", erasures.ForgetPrincipal.as_view(), name="api-forget"),
    path("erasures/<uuid:erasure_id>", erasures.ErasureDetail.as_view(), name="api-erasure"),
    path("facts/<id:fact_id>", facts.FactDetail.as_view(), name="api-fact"),
    path("facts/<id:fact_id>/withdraw", facts.FactWithdraw.as_view(), name="api-fact-withdraw"),
    path("facts/<id:fact_id>/dispute", facts.FactDispute.as_view(), name="api-fact-dispute"),
    path("sessions/<extid:session_id>/end", sessions.EndSession.as_view(), name="api-session-end"),
    path("admin/retrievals", AdminRetrievalLog.as_view(), name="api-admin-retrievals"),
    path("admin/projects/<slug:project>/why", attribution.WhyDidntItKnow.as_view(), name="api-admin-why"),
    path("admin/reviews", ReviewQueue.as_view(), name="api-admin-reviews"),
    path("admin/reviews/<id:write_id>/decision", ReviewDecisionView.as_view(), name="api-admin-decision"),
    path(POLICY, policy_api.PolicyView.as_view(), name="api-admin-policy"),
    path(f"{POLICY}/draft", policy_api.PolicyDraftView.as_view(), name="api-admin-policy-draft"),
    path(f"{POLICY}/publish", policy_api.PolicyPublishView.as_view(), name="api-admin-policy-publish"),
    path(f"{POLICY}/rollback", policy_api.PolicyRollbackView.as_view(), name="api-admin-policy-rollback"),
    path(f"{POLICY}/versions", policy_api.PolicyVersionsView.as_view(), name="api-admin-policy-versions"),
    path(f"{POLICY}/replay", policy_api.PolicyReplayView.as_view(), name="api-admin-policy-replay"),
    path(
        "admin/approvals/<int:approval_id>/decision",
        policy_api.ApprovalDecisionView.as_view(),
        name="api-admin-approval-decision",
    ),
    path("admin/jobs/<uuid:job_id>", policy_api.JobView.as_view(), name="api-admin-job"),
    path("admin/jobs/<uuid:job_id>/cancel", policy_api.JobCancelView.as_view(), name="api-admin-job-cancel"),
    path(
        "admin/projects/<slug:project>/principals/<extid:external_id>/forget",
        erasures.AdminForgetPrincipal.as_view(),
        name="api-admin-forget",
    ),
    path("admin/erasures/<uuid:erasure_id>", erasures.AdminErasureDetail.as_view(), name="api-admin-erasure"),
    path("admin/audit", AuditHistory.as_view(), name="api-admin-audit"),
    path("admin/audit/export", AuditExport.as_view(), name="api-admin-audit-export"),
]
