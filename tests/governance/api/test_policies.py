"""Governance API for policies: read, replace the draft, publish, versions, rollback, replay jobs."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from governance.models import AuditEntry, Job, PolicyDraft, PolicyVersion
from governance.rules.policy import PolicySettings
from tests.governance.policy_helpers import retrieve, write
from tests.personas import make_agent, make_user, token_client

pytestmark = pytest.mark.django_db

POLICY = "/api/v1/admin/projects/acme/agents/support-bot/policy"


def json_client(user) -> APIClient:
    client = token_client(user)
    client.default_format = "json"  # policies are JSON in and out (docs/api.md)
    return client


@pytest.fixture
def editor(policy_editor) -> APIClient:
    return json_client(policy_editor)


def test_get_answers_the_active_version_and_no_draft(editor, support_bot):
    response = editor.get(POLICY)
    assert response.status_code == 200
    assert response.json() == {"active": {"version": 1, **PolicySettings().to_dict()}, "draft": None}


def test_put_draft_takes_a_subset_and_keeps_the_rest_from_the_active_version(editor, support_bot):
    response = editor.put(
        f"{POLICY}/draft", {"confirm_days": 10, "allowed_kinds": ["profile"], "per_round_kinds": []}
    )
    assert response.status_code == 200, response.content
    draft = response.json()["draft"]
    assert draft == {
        **PolicySettings().to_dict(),
        "confirm_days": 10,
        "allowed_kinds": ["profile"],
        "per_round_kinds": [],
    }
    assert response.json()["active"]["version"] == 1
    assert editor.get(POLICY).json()["draft"] == draft


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"confirm_days": 5}, {"confirm_days"}),
        ({"weight_relevance": 0, "weight_freshness": 0, "weight_confidence": 0}, {"weight_relevance"}),
        ({"weight_confidence": -1}, {"weight_confidence"}),
        ({"token_budget": 500_000}, {"token_budget"}),
        ({"token_budget": "lots", "encoding": "gpt2"}, {"token_budget", "encoding"}),
        ({"require_identity_verification": "yes"}, {"require_identity_verification"}),
        ({"version": 3}, {"version"}),
    ],
)
def test_invalid_draft_is_400_with_field_errors_and_saves_nothing(editor, support_bot, body, fields):
    editor.put(f"{POLICY}/draft", {"recent_days": 3})  # an existing draft must survive a bad PUT
    before = PolicyDraft.objects.get().settings

    response = editor.put(f"{POLICY}/draft", body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["fields"]) == fields
    assert all(isinstance(m, str) and m for messages in error["fields"].values() for m in messages)
    assert PolicyDraft.objects.get().settings == before
    assert PolicyVersion.objects.count() == 1


def test_confirm_days_error_says_what_to_do(editor, support_bot):
    response = editor.put(f"{POLICY}/draft", {"recent_days": 10, "confirm_days": 10})
    assert response.json()["error"]["fields"]["confirm_days"] == [
        "Must be greater than “Recent for (days)”, or no fact could be in the re-confirm tier."
    ]


def test_a_draft_body_must_be_an_object(editor, support_bot):
    response = editor.put(f"{POLICY}/draft", [1, 2], format="json")
    assert response.status_code == 400
    assert not PolicyDraft.objects.exists()


def test_publishing_changes_the_version_the_next_retrieval_reports_but_not_earlier_ones(editor, support_bot):
    write(support_bot, "Prefers invoices by email", days_ago=20)
    earlier = retrieve(support_bot, session="s-1")
    assert earlier["policy_version"] == 1
    assert "invoices" in earlier["context"]

    editor.put(f"{POLICY}/draft", {"confirm_days": 10})
    response = editor.post(f"{POLICY}/publish", {"reason": "Twenty-day-old memory confused users"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["version"], body["active"], body["reason"], body["created_by"]) == (
        2,
        True,
        "Twenty-day-old memory confused users",
        "pat",
    )
    later = retrieve(support_bot, session="s-2")
    assert later["policy_version"] == 2
    assert "invoices" not in later["context"]  # 20 days is now beyond confirm_days (R9)
    # The earlier retrieval keeps the version it used (R14).
    assert (
        support_bot.client.get(f"/api/v1/retrievals/{earlier['retrieval_id']}").json()["policy_version"] == 1
    )
    assert editor.get(POLICY).json() == {
        "active": {"version": 2, **PolicySettings(confirm_days=10).to_dict()},
        "draft": None,
    }


def test_publish_needs_a_reason_and_a_draft(editor, support_bot):
    response = editor.post(f"{POLICY}/publish", {"reason": "  "})
    assert response.status_code == 400
    assert "reason" in response.json()["error"]["fields"]
    response = editor.post(f"{POLICY}/publish", {"reason": "Go"})
    assert response.status_code == 409
    assert "no draft" in response.json()["error"]["message"].lower()
    assert PolicyVersion.objects.count() == 1


def test_versions_list_who_when_why_and_rollback_creates_a_new_equal_version(editor, support_bot):
    editor.put(f"{POLICY}/draft", {"confirm_days": 10, "token_budget": 300})
    editor.post(f"{POLICY}/publish", {"reason": "Tighter"})

    response = editor.post(f"{POLICY}/rollback", {"version": 1, "reason": "Tighter lost answers"})

    assert response.status_code == 201, response.content
    rolled = response.json()
    assert (rolled["version"], rolled["rolled_back_from"], rolled["active"]) == (3, 1, True)
    versions = editor.get(f"{POLICY}/versions").json()["results"]
    assert [(v["version"], v["active"], v["reason"]) for v in versions] == [
        (3, True, "Tighter lost answers"),
        (2, False, "Tighter"),
        (1, False, "Initial policy for a new agent"),
    ]
    assert versions[0]["settings"] == versions[2]["settings"] == PolicySettings().to_dict()
    assert versions[1]["created_by"] == "pat"
    assert editor.get(POLICY).json()["active"] == {"version": 3, **PolicySettings().to_dict()}
    assert editor.post(f"{POLICY}/rollback", {"version": 3, "reason": "again"}).status_code == 409
    assert editor.post(f"{POLICY}/rollback", {"version": 9, "reason": "x"}).status_code == 400


def test_reviewers_and_auditors_read_but_cannot_change(project, support_bot, reviewer, auditor, caplog):
    for user in (reviewer, auditor):
        client = json_client(user)
        assert client.get(POLICY).status_code == 200
        assert client.get(f"{POLICY}/versions").status_code == 200
        with caplog.at_level(logging.WARNING, logger="governance.access"):
            assert client.put(f"{POLICY}/draft", {"confirm_days": 10}).status_code == 403
            assert client.post(f"{POLICY}/publish", {"reason": "x"}).status_code == 403
            assert client.post(f"{POLICY}/replay", {"events": 5}).status_code == 403
        assert f"denied user={user.username}" in caplog.text
    assert not PolicyDraft.objects.exists()
    assert not Job.objects.exists()


def test_another_projects_agent_is_404_and_untouched(project, other_project, support_bot, outsider_bot):
    globex_editor = json_client(make_user("gil", "policy_editor", other_project))
    assert globex_editor.get(POLICY).status_code == 404
    assert globex_editor.put(f"{POLICY}/draft", {"confirm_days": 10}).status_code == 404
    assert globex_editor.post(f"{POLICY}/publish", {"reason": "x"}).status_code == 404
    assert not PolicyDraft.objects.exists()
    own = "/api/v1/admin/projects/globex/agents/globex-bot/policy"
    assert globex_editor.get(own).status_code == 200


def test_without_a_token_is_401(client, support_bot):
    assert client.get(POLICY).status_code == 401
    assert APIClient().put(f"{POLICY}/draft", {"confirm_days": 10}, format="json").status_code == 401


def test_replay_returns_a_job_that_reports_progress_and_the_result(
    editor, support_bot, django_capture_on_commit_callbacks
):
    write(support_bot, "Prefers invoices by email", days_ago=20)
    event = retrieve(support_bot, session="s-1")
    editor.put(f"{POLICY}/draft", {"confirm_days": 10})

    with django_capture_on_commit_callbacks(execute=True):
        response = editor.post(f"{POLICY}/replay", {"events": 50})

    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    assert response["Location"] == f"/api/v1/admin/jobs/{job_id}"
    job = editor.get(f"/api/v1/admin/jobs/{job_id}").json()
    assert (job["status"], job["kind"], job["agent"]) == ("succeeded", "policy_replay", "support-bot")
    assert job["progress"] == {"done": 1, "total": 1, "percent": 100}
    assert job["params"] == {"events": 50, "active_version": 1}
    result = job["result"]
    assert result["changed_events"] == 1
    assert result["changed"][0]["event_id"] == event["retrieval_id"]
    assert result["changed"][0]["dropped"][0]["reason"] == "stale"
    assert AuditEntry.objects.filter(action="policy.replay_started").count() == 1


def test_replay_needs_a_draft_and_a_count_within_limits(editor, support_bot):
    assert editor.post(f"{POLICY}/replay", {"events": 5}).status_code == 409
    editor.put(f"{POLICY}/draft", {"confirm_days": 10})
    for events in (0, 10_001, "many"):
        response = editor.post(f"{POLICY}/replay", {"events": events})
        assert response.status_code == 400
        assert "events" in response.json()["error"]["fields"]
    assert not Job.objects.exists()


def test_jobs_of_another_project_are_404_and_readers_see_their_own(
    editor, support_bot, reviewer, other_project
):
    editor.put(f"{POLICY}/draft", {"confirm_days": 10})
    job_id = editor.post(f"{POLICY}/replay", {"events": 5}).json()["id"]  # on-commit never fires here: queued
    assert json_client(reviewer).get(f"/api/v1/admin/jobs/{job_id}").json()["status"] == "queued"
    outsider = json_client(make_user("gil", "policy_editor", other_project))
    assert outsider.get(f"/api/v1/admin/jobs/{job_id}").status_code == 404
    assert outsider.post(f"/api/v1/admin/jobs/{job_id}/cancel").status_code == 404
    assert json_client(reviewer).post(f"/api/v1/admin/jobs/{job_id}/cancel").status_code == 403

    cancelled = editor.post(f"/api/v1/admin/jobs/{job_id}/cancel").json()

    assert (cancelled["status"], cancelled["cancel_requested"]) == ("cancelled", True)


def test_policy_endpoints_are_in_the_openapi_schema(client):
    schema = client.get("/api/schema/").content.decode()
    for path in (
        "/policy/draft",
        "/policy/publish",
        "/policy/versions",
        "/policy/replay",
        "/admin/jobs/{job_id}",
    ):
        assert path in schema


def test_make_agent_policy_reaches_the_api(project, editor):
    make_agent(project, "tiny-bot", token_budget=100)
    active = editor.get("/api/v1/admin/projects/acme/agents/tiny-bot/policy").json()["active"]
    assert active["token_budget"] == 100
