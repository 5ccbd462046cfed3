"""Roles per project (docs/operations.md, Roles): the role in the object's project decides.

The person at the centre of these tests audits project A (acme) and reviews
project B (globex): they may decide B's writes and not A's, in the console
and the API alike.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.admin import site as admin_site
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from governance import access
from governance.context import actor_scope
from governance.models import AuditEntry, Membership, PersonalAccessToken, Write
from governance.models.projects import Role
from governance.services import credentials, memberships
from tests.governance.review_helpers import PENDING, propose
from tests.personas import grant, make_user, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def split(project, other_project):
    """Auditor in A (acme), reviewer in B (globex)."""
    user = make_user("vic", "auditor", project)
    grant(user, "reviewer", other_project)
    return user


@pytest.fixture
def writes(support_bot, outsider_bot) -> dict[str, Write]:
    return {"a": propose(support_bot, PENDING), "b": propose(outsider_bot, PENDING)}


def decision_url(write: Write) -> str:
    return f"/api/v1/admin/reviews/{write.pk}/decision"


def test_auditor_in_a_reviewer_in_b_decides_only_b_through_the_api(split, writes):
    api = token_client(split)

    refused = api.post(decision_url(writes["a"]), {"action": "approve", "reason": "ok"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert refused.json()["error"]["message"] == "Your role in this project does not allow this."
    assert Write.objects.get(pk=writes["a"].pk).status == "pending_review"

    allowed = api.post(decision_url(writes["b"]), {"action": "approve", "reason": "ok"}, format="json")
    assert allowed.status_code == 200
    assert Write.objects.get(pk=writes["b"].pk).status == "active"


def test_auditor_in_a_reviewer_in_b_decides_only_b_in_the_console(client, split, writes):
    client.force_login(split)
    body = {"action": "approve", "reason": "ok"}

    refused = client.post(reverse("reviews:decide", args=[writes["a"].pk]), body)
    assert refused.status_code == 403
    assert "Your role in this project does not allow this." in refused.content.decode()
    assert Write.objects.get(pk=writes["a"].pk).status == "pending_review"
    assert client.post(reverse("reviews:decide", args=[writes["b"].pk]), body).status_code == 302
    assert Write.objects.get(pk=writes["b"].pk).status == "active"


def test_the_queue_offers_decisions_only_where_the_role_allows(client, split, writes):
    client.force_login(split)
    html = client.get(reverse("reviews:queue")).content.decode()

    assert reverse("reviews:decide", args=[writes["b"].pk]) in html
    assert reverse("reviews:decide", args=[writes["a"].pk]) not in html
    assert "lets you read this write, not decide it" in html


def test_bulk_decisions_skip_projects_where_the_role_cannot_decide(client, split, writes):
    client.force_login(split)
    body = {"write": [writes["a"].pk, writes["b"].pk], "action": "reject", "reason": "spam"}

    assert client.post(reverse("reviews:bulk"), body).status_code == 400  # A's write is not a choice
    assert set(Write.objects.values_list("status", flat=True)) == {"pending_review"}


def test_an_admin_in_a_has_no_power_in_b_where_they_only_audit(project, other_project, writes):
    user = make_user("ava", "admin", project)
    grant(user, "auditor", other_project)
    api = token_client(user)

    assert (
        api.post(decision_url(writes["b"]), {"action": "reject", "reason": "x"}, format="json").status_code
        == 403
    )
    assert (
        api.post(decision_url(writes["a"]), {"action": "reject", "reason": "x"}, format="json").status_code
        == 200
    )


def test_access_helpers_answer_per_project(split, project, other_project, django_assert_num_queries):
    with django_assert_num_queries(1):  # one read of the memberships, then the per-request cache
        assert access.role_in(split, project) == Role.AUDITOR
        assert access.role_in(split, other_project.pk) == Role.REVIEWER
        assert not access.has_role(split, project, access.REVIEW_ROLES)
        assert access.has_role(split, other_project, access.REVIEW_ROLES)
        assert access.project_ids_with_role(split, access.REVIEW_ROLES) == [other_project.pk]
    assert list(access.projects_with_role(split, access.REVIEW_ROLES)) == [other_project]
    assert set(access.projects_of(split)) == {project, other_project}


def test_an_action_any_project_allows_passes_and_one_none_allows_is_refused_and_logged(split, caplog):
    access.require_anywhere(split, access.REVIEW_ROLES, action="bulk decision")  # B lets vic review
    with caplog.at_level("WARNING", logger="governance.access"), pytest.raises(PermissionDenied) as refused:
        access.require_anywhere(split, access.ADMIN_ROLES, action="create agent key")
    assert str(refused.value) == "Your role in this project does not allow this."
    assert "denied user=vic action=create agent key" in caplog.text


def test_a_superuser_is_the_platform_operator_not_a_member(client, project, writes):
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root", password="x" * 12)
    assert list(access.projects_of(root)) == []
    client.force_login(root)
    assert client.get(reverse("reviews:queue")).status_code == 403
    assert PENDING.encode() not in client.get("/").content


# --- memberships: granted, changed and removed through one audited service -----------------


def test_grant_change_and_revoke_are_audited_naming_role_and_project(project):
    person = make_user("nia", None)
    with actor_scope("test"):
        memberships.grant_role(project, person, "auditor", reason="joined")
        memberships.grant_role(project, person, "reviewer", reason="promoted")
        memberships.revoke_membership(Membership.objects.get(user=person), reason="left")

    # Unsealed here (the test's transaction never commits, so no seal runs): every sequence
    # is NULL, and only the primary key keeps the order they were written in.
    entries = list(
        AuditEntry.objects.filter(project=project, action__startswith="membership.").order_by(
            "sequence", "pk"
        )
    )
    assert [e.action for e in entries] == [
        "membership.granted",
        "membership.role_changed",
        "membership.revoked",
    ]
    assert entries[0].data == {"user": "nia", "role": "auditor", "project": "acme"}
    assert entries[1].data["role"] == "reviewer" and entries[1].data["previous_role"] == "auditor"
    assert [e.reason for e in entries] == ["joined", "promoted", "left"]
    assert not Membership.objects.filter(user=person).exists()


def test_a_project_keeps_an_administrator(project):
    admin = make_user("ada", "admin", project)
    with actor_scope("test"), pytest.raises(memberships.MembershipError):
        memberships.grant_role(project, admin, "auditor")
    assert Membership.objects.get(user=admin).role == Role.ADMIN


def test_a_project_admin_manages_roles_in_the_console(client, project, reviewer):
    admin = make_user("ada", "admin", project)
    newcomer = make_user("ned", None)
    client.force_login(admin)

    page = client.get(reverse("credentials:list")).content.decode()
    assert 'data-member="riley"' in page

    grant_url = reverse("credentials:member_grant", args=[project.slug])
    body = {f"grant-{project.pk}-username": "ned", f"grant-{project.pk}-role": "policy_editor"}
    assert client.post(grant_url, body).status_code == 302
    assert access.role_in(newcomer, project) == Role.POLICY_EDITOR

    membership = Membership.objects.get(user=reviewer)
    assert (
        client.post(reverse("credentials:member_role", args=[membership.pk]), {"role": "auditor"}).status_code
        == 302
    )
    assert Membership.objects.get(pk=membership.pk).role == Role.AUDITOR
    assert (
        client.post(
            reverse("credentials:member_remove", args=[membership.pk]), {"reason": "left"}
        ).status_code
        == 302
    )
    assert not Membership.objects.filter(pk=membership.pk).exists()
    actions = set(AuditEntry.objects.filter(project=project).values_list("action", flat=True))
    assert {"membership.granted", "membership.role_changed", "membership.revoked"} <= actions


def test_only_a_project_admin_manages_roles(client, project, reviewer, auditor):
    client.force_login(reviewer)
    membership = Membership.objects.get(user=auditor)
    assert (
        client.post(reverse("credentials:member_role", args=[membership.pk]), {"role": "admin"}).status_code
        == 403
    )
    assert Membership.objects.get(pk=membership.pk).role == Role.AUDITOR
    assert 'id="members"' not in client.get(reverse("credentials:list")).content.decode()


# --- create_user_token ---------------------------------------------------------------------


def _create_token(*args: str) -> str:
    out = io.StringIO()
    call_command("create_user_token", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_create_user_token_grants_the_role_in_that_project_only(project, other_project):
    _create_token("riley", "--role", "reviewer", "--project", "acme")
    _create_token("riley", "--role", "auditor", "--project", "globex")
    _create_token("riley", "--role", "admin", "--project", "acme")  # changes the role in acme

    roles = dict(Membership.objects.filter(user__username="riley").values_list("project__slug", "role"))
    assert roles == {"acme": "admin", "globex": "auditor"}
    acme = AuditEntry.objects.filter(project=project, action__startswith="membership.")
    # Unsealed, as above: the primary key orders them.
    assert list(acme.order_by("sequence", "pk").values_list("action", flat=True)) == [
        "membership.granted",
        "membership.role_changed",
    ]
    assert AuditEntry.objects.filter(project=other_project, action="membership.granted").count() == 1


@override_settings(ACCESS_TOKEN_DEFAULT_DAYS=90, ACCESS_TOKEN_MAX_DAYS=365)
def test_create_user_token_days_default_and_cap(project):
    _create_token("riley", "--role", "reviewer", "--project", "acme")
    _create_token("riley", "--role", "reviewer", "--project", "acme", "--days", "7")
    _create_token("riley", "--role", "reviewer", "--project", "acme", "--days", "5000")
    lifetimes = [
        round((t.expires_at - t.created_at) / timedelta(days=1))
        for t in PersonalAccessToken.objects.order_by("pk")
    ]
    assert lifetimes == [90, 7, 365]


# --- tokens: expiry and revocation ----------------------------------------------------------


def test_an_expired_token_gets_401_json(reviewer):
    api = token_client(reviewer)
    assert api.get("/api/v1/admin/reviews").status_code == 200
    PersonalAccessToken.objects.filter(user=reviewer).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = api.get("/api/v1/admin/reviews")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_an_auditor_revokes_their_own_token(client, auditor):
    api = token_client(auditor)
    token = PersonalAccessToken.objects.get(user=auditor)
    client.force_login(auditor)

    assert (
        client.post(
            reverse("credentials:token_revoke", args=[token.pk]), {"reason": "lost laptop"}
        ).status_code
        == 302
    )
    assert api.get("/api/v1/admin/audit").status_code == 401
    assert AuditEntry.objects.filter(action="access_token.revoked", reason="lost laptop").exists()


def test_a_project_admin_revokes_a_members_token_but_not_an_outsiders(client, project, reviewer, outsider):
    admin = make_user("ada", "admin", project)
    with actor_scope("test"):
        member_token, _ = credentials.create_access_token(reviewer)
        outsider_token, _ = credentials.create_access_token(outsider)
    client.force_login(admin)

    assert member_token.prefix in client.get(reverse("credentials:list")).content.decode()
    url = reverse("credentials:token_revoke", args=[member_token.pk])
    assert client.post(url, {"reason": "left the team"}).status_code == 302
    assert PersonalAccessToken.objects.get(pk=member_token.pk).revoked_at is not None
    entry = AuditEntry.objects.get(action="access_token.revoked", project=project)
    assert entry.actor == "user:ada" and entry.data["user"] == "riley"

    assert (
        client.post(
            reverse("credentials:token_revoke", args=[outsider_token.pk]), {"reason": "x"}
        ).status_code
        == 404
    )
    assert PersonalAccessToken.objects.get(pk=outsider_token.pk).revoked_at is None


# --- operator defaults ---------------------------------------------------------------------


def test_run_stack_loads_the_demo_only_into_the_embedded_database_when_asked():
    from governance.management.commands.run_stack import DEMO_HINT, plan_demo

    external = {"DATABASE_URL": "postgresql://db/prod"}
    assert not plan_demo(external, flag=True, has_projects=False).load
    assert not plan_demo({**external, "DEMO": "1"}, flag=False, has_projects=False).load
    assert "DATABASE_URL" in plan_demo({**external, "DEMO": "1"}, flag=False, has_projects=False).message
    assert not plan_demo(external, flag=False, has_projects=False).load
    assert not plan_demo({}, flag=False, has_projects=False).load
    assert plan_demo({}, flag=False, has_projects=False).message == DEMO_HINT
    assert plan_demo({"DEMO": "1"}, flag=False, has_projects=False).load
    assert plan_demo({}, flag=True, has_projects=True).load


def test_load_demo_refuses_an_external_database(monkeypatch):
    from django.core.management.base import CommandError

    monkeypatch.setenv("DATABASE_URL", "postgresql://db/prod")
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command("load_demo", stdout=io.StringIO())


def test_django_admin_has_no_celery_beat_editor_and_is_for_superusers_only(client, project):
    labels = {model._meta.app_label for model in admin_site._registry}
    assert "django_celery_beat" not in labels
    staff = make_user("stan", "admin", project)
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    assert client.get("/admin/").status_code == 302  # to the admin login: staff is not enough


def test_changes_in_django_admin_are_audited(client):
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root", password="x" * 12)
    someone = User.objects.create_user("someone", password="y" * 12)
    client.force_login(root)
    response = client.post(
        reverse("admin:auth_user_change", args=[someone.pk]),
        {
            "username": "someone",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
            "initial-date_joined_0": "2026-01-01",
            "initial-date_joined_1": "00:00:00",
        },
    )
    assert response.status_code == 302
    entry = AuditEntry.objects.get(action="admin.changed")
    assert entry.project is None and entry.actor == "user:root" and entry.data["object"] == "someone"


# --- browser data --------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/", "/reviews/", "/history/", "/credentials/", "/retrievals/"])
def test_console_pages_are_never_stored(client, reviewer, url):
    client.force_login(reviewer)
    response = client.get(url)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
    assert 'hx-history="false"' in response.content.decode()


def test_the_login_page_clears_htmx_history(client):
    html = client.get(reverse("login")).content.decode()
    assert "governance/forget-history" in html
    assert "<script>" not in html  # no inline script: a strict CSP can forbid them
