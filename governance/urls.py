"""Console URLs: one section per noun, each with its own namespace (``reviews:queue``)."""

from django.urls import URLPattern, URLResolver, include, path

from governance.views import (
    audit,
    credentials,
    erasures,
    evaluations,
    facts,
    feed,
    home,
    metrics,
    people,
    policies,
    retrievals,
    reviews,
    search,
    sessions,
)


def section(prefix: str, namespace: str, *patterns: URLPattern) -> URLResolver:
    """One noun's pages under ``prefix``, reversed as ``namespace:name``."""
    return path(prefix, include((list(patterns), namespace)))


# An agent's pages under agents/.
AGENT = "<slug:project>/<slug:agent>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", home.home, name="home"),
    section(
        "reviews/",
        "reviews",
        path("", reviews.queue, name="queue"),
        path("bulk", reviews.bulk, name="bulk"),
        path("similar", reviews.similar, name="similar"),
        path("<int:write_id>/decide", reviews.decide, name="decide"),
        path("<int:write_id>/undo", reviews.undo, name="undo"),
    ),
    section(
        "facts/",
        "facts",
        path("", facts.index, name="index"),
        path("<int:fact_id>/", facts.detail, name="detail"),
        path("<int:fact_id>/withdraw", facts.withdraw, name="withdraw"),
        path("<int:fact_id>/verify", facts.verify, name="verify"),
        path("<int:fact_id>/authority", facts.authority, name="authority"),
    ),
    section(
        "retrievals/",
        "retrievals",
        path("", retrievals.log, name="log"),
        path("<int:event_id>/", retrievals.detail, name="detail"),
        # The external id comes last and may hold any character, slashes included.
        path("principals/<slug:project>/<path:external_id>/", retrievals.principal, name="principal"),
    ),
    section(
        "agents/",
        "policies",
        path("", policies.agents, name="agents"),
        path("<slug:project>/source-caps", policies.source_caps, name="source_caps"),
        path("<slug:project>/second-approval", policies.second_approval, name="second_approval"),
        path("approvals/<int:approval_id>/decision", policies.decide_approval, name="decide_approval"),
        path(AGENT, policies.agent, name="agent"),
        path(f"{AGENT}questions", metrics.questions, name="questions"),
        path(f"{AGENT}draft", policies.save_draft, name="save_draft"),
        path(f"{AGENT}what-if", policies.what_if, name="what_if"),
        path(f"{AGENT}draft/discard", policies.discard_draft, name="discard_draft"),
        path(f"{AGENT}publish", policies.publish, name="publish"),
        path(f"{AGENT}versions/<int:version>/rollback", policies.rollback, name="rollback"),
        path(f"{AGENT}replays", policies.start_replay, name="start_replay"),
        path(f"{AGENT}replays/<uuid:job_id>/", policies.replay, name="replay"),
        path(f"{AGENT}replays/<uuid:job_id>/cancel", policies.cancel_replay, name="cancel_replay"),
    ),
    section(
        "history/",
        "audit",
        path("", audit.history, name="history"),
        path("export", audit.export, name="export"),
        path("verify", audit.verify, name="verify"),
        path("verify/<uuid:verification_id>", audit.verification, name="verification"),
        path("facts/<int:fact_id>/", audit.fact_timeline, name="fact_timeline"),
    ),
    section(
        "sessions/",
        "sessions",
        path("", sessions.index, name="index"),
        path("<int:session_id>/", sessions.detail, name="detail"),
    ),
    section("search/", "search", path("", search.results, name="results")),
    section("people/", "people", path("", people.directory, name="directory")),
    section(
        "credentials/",
        "credentials",
        path("", credentials.key_list, name="list"),
        path("agent-keys/new", credentials.key_create, name="key_create"),
        path("agent-keys/<int:key_id>/revoke", credentials.key_revoke, name="key_revoke"),
        path("agents/<int:agent_id>/sources", credentials.agent_sources, name="agent_sources"),
        path("tokens/new", credentials.token_create, name="token_create"),
        path("tokens/<int:token_id>/revoke", credentials.token_revoke, name="token_revoke"),
        path("members/<slug:project>/grant", credentials.member_grant, name="member_grant"),
        path("members/<int:membership_id>/role", credentials.member_role, name="member_role"),
        path("members/<int:membership_id>/remove", credentials.member_remove, name="member_remove"),
    ),
    section(
        "erasures/",
        "erasures",
        path("people/<int:principal_id>/", erasures.confirm, name="confirm"),
        path("people/<int:principal_id>/forget/", erasures.forget, name="forget"),
        path("<uuid:erasure_id>/", erasures.job, name="job"),
        path("<uuid:erasure_id>/receipt.json", erasures.receipt_json, name="receipt-json"),
    ),
    section(
        "quality/",
        "quality",
        path("", evaluations.runs, name="runs"),
        path("runs/<int:run_id>/", evaluations.run, name="run"),
        path("why/", evaluations.why, name="why"),
        path("live/", metrics.live_index, name="live_index"),
        path("live/<slug:project>/", metrics.live, name="live"),
        path("live/<slug:project>/<slug:agent>/", metrics.live, name="live_agent"),
    ),
    section(
        "feed/",
        "feed",
        path("", feed.feed_page, name="page"),
        path("webhooks/new", feed.webhook_create, name="webhook_create"),
        path("webhooks/<int:endpoint_id>/disable", feed.webhook_disable, name="webhook_disable"),
    ),
]
