"""Console URLs for policies (included by governance/urls.py under ``agents/``)."""

from django.urls import URLPattern, path

from governance.views import metrics, policies

app_name = "policies"
AGENT = "<slug:project>/<slug:agent>/"
urlpatterns: list[URLPattern] = [
    path("", policies.agents, name="agents"),
    path("<slug:project>/source-caps", policies.source_caps, name="source_caps"),
    path("<slug:project>/second-approval", policies.second_approval, name="second_approval"),
    path("approvals/<int:approval_id>/decision", policies.decide_approval, name="decide_approval"),
    path(AGENT, policies.agent, name="agent"),
    path(f"{AGENT}questions", metrics.questions, name="questions"),
    path(f"{AGENT}draft", policies.save_draft, name="save_draft"),
    path(f"{AGENT}draft/discard", policies.discard_draft, name="discard_draft"),
    path(f"{AGENT}publish", policies.publish, name="publish"),
    path(f"{AGENT}versions/<int:version>/rollback", policies.rollback, name="rollback"),
    path(f"{AGENT}replays", policies.start_replay, name="start_replay"),
    path(f"{AGENT}replays/<uuid:job_id>/", policies.replay, name="replay"),
    path(f"{AGENT}replays/<uuid:job_id>/cancel", policies.cancel_replay, name="cancel_replay"),
]
