"""Editors cannot switch review off: widening changes need an admin, optionally two (least authority).

Raising a source cap, lowering the auto-approve level and turning identity
verification off each let more become memory (or reach a context) without a
person. Only a project administrator makes them, each is audited with before
and after, and a project may ask a second administrator to approve them.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from governance.models import AuditEntry, ChangeApproval, Project
from governance.services import policies
from tests.personas import AgentPersona, make_user, token_client

pytestmark = pytest.mark.django_db

POLICY = "/api/v1/admin/projects/acme/agents/support-bot/policy"


def draft_and_publish(user: User, **fields: Any) -> Any:
    client = token_client(user)
    assert client.put(f"{POLICY}/draft", fields, format="json").status_code == 200
    return client.post(f"{POLICY}/publish", {"reason": "Fewer reviews"}, format="json")


@pytest.fixture
def admin(project: Project) -> User:
    return make_user("ada", "admin", project)


@pytest.fixture
def second_admin(project: Project) -> User:
    return make_user("ben", "admin", project)


@pytest.mark.parametrize(
    "fields", [{"auto_approve_min_authority": 1}, {"require_identity_verification": False}]
)
def test_a_policy_editor_cannot_widen_what_needs_no_review(
    support_bot: AgentPersona, policy_editor: User, fields: dict[str, Any]
) -> None:
    response = draft_and_publish(policy_editor, **fields)

    assert response.status_code == 403
    assert "administrator" in response.json()["error"]["message"]
    support_bot.agent.refresh_from_db()
    assert support_bot.agent.active_policy is not None
    assert support_bot.agent.active_policy.version == 1


def test_a_policy_editor_may_still_tighten(support_bot: AgentPersona, policy_editor: User) -> None:
    response = draft_and_publish(policy_editor, auto_approve_min_authority=5, min_authority=4)
    assert response.status_code == 201


def test_an_admin_widens_and_the_audit_entry_shows_before_and_after(
    support_bot: AgentPersona, admin: User
) -> None:
    response = draft_and_publish(admin, auto_approve_min_authority=2)

    assert response.status_code == 201
    entry = AuditEntry.objects.filter(action="policy.published").latest("sequence")
    assert entry.data["changes"]["auto_approve_min_authority"] == {"from": 4, "to": 2}
    assert entry.data["widening"] == ["Writes become memory without review from authority 2 (was 4)."]


def test_raising_a_source_cap_needs_an_admin(project: Project, policy_editor: User, admin: User) -> None:
    with pytest.raises(policies.NeedsAdmin):
        policies.set_source_caps(project, {"model_inference": 5}, "Trust the model", user=policy_editor)
    # Lowering is tightening: an editor may.
    policies.set_source_caps(project, {"web_page": 1, "chat_message": 1}, "Less chat", user=policy_editor)
    policies.set_source_caps(project, {"model_inference": 3}, "Trust the model a bit", user=admin)
    project.refresh_from_db()
    assert project.source_caps == {"model_inference": 3}


def test_two_people_a_widening_change_waits_for_a_second_admin(
    support_bot: AgentPersona, admin: User, second_admin: User
) -> None:
    policies.set_second_approval(support_bot.agent.project, True, "Two-person rule", user=admin)

    waiting = draft_and_publish(admin, require_identity_verification=False)

    assert waiting.status_code == 202
    approval_id = waiting.json()["approval"]["id"]
    support_bot.agent.refresh_from_db()
    assert support_bot.agent.active_policy is not None
    assert support_bot.agent.active_policy.version == 1
    decision = f"/api/v1/admin/approvals/{approval_id}/decision"
    own = token_client(admin).post(decision, {"action": "approve", "reason": "ok"}, format="json")
    assert own.status_code == 409
    approved = token_client(second_admin).post(decision, {"action": "approve", "reason": "ok"}, format="json")
    assert approved.status_code == 200
    assert approved.json()["approval"]["status"] == "approved"
    support_bot.agent.refresh_from_db()
    assert support_bot.agent.active_policy is not None
    assert support_bot.agent.active_policy.policy.require_identity_verification is False
    entry = AuditEntry.objects.filter(action="policy.published").latest("sequence")
    assert entry.data["approved_by"] == "ben"


def test_a_second_approval_goes_stale_when_the_policy_moved(
    support_bot: AgentPersona, admin: User, second_admin: User
) -> None:
    project = support_bot.agent.project
    policies.set_second_approval(project, True, "Two-person rule", user=admin)
    approval = policies.publish_draft(
        policies.save_draft(support_bot.agent, {"auto_approve_min_authority": 2}, user=admin).agent,
        "Fewer reviews",
        user=admin,
    )
    assert isinstance(approval, ChangeApproval)
    policies.save_draft(support_bot.agent, {"token_budget": 500}, user=admin)
    policies.publish_draft(support_bot.agent, "Smaller block", user=admin)

    decided = policies.decide_approval(approval.pk, approve=True, reason="ok", user=second_admin)

    assert decided.status == "stale"
    support_bot.agent.refresh_from_db()
    assert support_bot.agent.active_policy is not None
    assert support_bot.agent.active_policy.policy.auto_approve_min_authority == 4
