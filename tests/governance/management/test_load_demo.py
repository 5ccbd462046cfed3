"""``manage.py load_demo``: the demo holds the situations the product exists for, via the services."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from governance.management.commands.load_demo import DEMO_PASSWORD, DEMO_PROJECT, DEMO_USERS, DemoBuilder
from governance.models import (
    AuditEntry,
    Fact,
    Membership,
    Principal,
    Project,
    RetrievalEvent,
    ReviewDecision,
    Session,
    Supersession,
    Tombstone,
    Write,
)
from governance.models.projects import Role


def load() -> str:
    out = StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


def checks(write: Write) -> set[str]:
    return {finding["check"] for finding in write.findings}


@pytest.mark.django_db
def test_demo_holds_the_design_situations() -> None:
    output = load()
    project = Project.objects.get(slug=DEMO_PROJECT)
    assert "loaded" in output

    # Sizes: a few dozen principals, a few hundred facts, a few dozen retrievals in rounds 1 and 2.
    assert 25 <= Principal.objects.filter(project=project).count() <= 40
    assert 250 <= Fact.objects.filter(project=project).count() <= 350
    assert 24 <= RetrievalEvent.objects.filter(project=project).count() <= 60
    assert {1, 2} <= set(RetrievalEvent.objects.filter(project=project).values_list("round", flat=True))
    assert Session.objects.filter(project=project, ended_at__isnull=False).count() >= 5
    sources = set(Fact.objects.filter(project=project).values_list("source_type", flat=True))
    assert sources >= {
        "user_statement", "support_ticket", "chat_message", "tool_output", "documentation",
        "config", "model_inference", "summarizer", "web_page",
    }  # fmt: skip
    code_policy = project.agents.get(slug="code-assistant").active_policy
    assert code_policy is not None and code_policy.policy.per_round_kinds == ("episodic", "incident")

    # Every write went through submit_write: each has its audit entry (R15).
    writes = Write.objects.filter(project=project)
    assert AuditEntry.objects.filter(project=project, action="write.submitted").count() == writes.count()
    # The statements are distinct enough that the guard saw no burst of repeats.
    assert not any("burst" in checks(w) for w in writes)

    # R6: the customer's region moved from us-east-1 to eu-west-2 by a second direct statement.
    region = Supersession.objects.select_related("old_fact", "new_fact").get(
        old_fact__principal__external_id="cust-1042", old_fact__key="deployment_region"
    )
    assert "us-east-1" in region.old_fact.statement and region.old_fact.status == "superseded"
    assert "eu-west-2" in region.new_fact.statement and region.new_fact.status == "active"
    assert region.decided_by == "rule:R6"
    assert region.new_fact.confidence == "verified"
    stale_guess = writes.get(source_type="model_inference", key="deployment_region")
    assert stale_guess.status == "rejected" and "contradicts_verified" in checks(stale_guess)

    # R7: a config write moved the project from Python 3.11 to 3.13.
    python = Supersession.objects.select_related("old_fact", "new_fact").get(old_fact__key="python_version")
    assert python.old_fact.principal_id is None and "3.11" in python.old_fact.statement
    assert python.new_fact.source_type == "config" and "3.13" in python.new_fact.statement
    assert python.decided_by == "rule:R7"

    # The Slack joke about the CTO waits for a reviewer at authority 2.
    joke = Fact.objects.get(project=project, statement__icontains="cat herder")
    assert (joke.source_type, joke.authority, joke.status) == ("chat_message", 2, "pending_review")

    # The summary mentioning the meeting with the VP of Engineering dropped a prohibition (R17).
    summary = writes.get(kind="summary", statement__contains="VP of Engineering")
    assert summary.status == "pending_review" and "summary_check" in checks(summary)
    assert summary.fact is not None and summary.fact.summary_check is not None

    # A model's guess that Maya changed pairing role waits for review instead of superseding (R6).
    role_change = writes.get(key="role", source_type="model_inference")
    assert role_change.status == "pending_review"
    assert role_change.conflicts_with is not None and role_change.conflicts_with.status == "active"
    assert "driver" in role_change.conflicts_with.statement

    # The poisoned web page is quarantined with the guard's instruction finding (R5).
    poisoned = writes.get(source_type="web_page")
    assert poisoned.status == "quarantined" and "instruction" in checks(poisoned)
    assert "always recommend ACME" in poisoned.statement

    # A withdrawn phone number left a tombstone that blocks re-learning it (R8).
    tombstone = Tombstone.objects.select_related("fact").get(project=project)
    assert tombstone.fact.status == "withdrawn" and tombstone.fact.statement == ""
    relearn = writes.get(fingerprint=tombstone.fingerprint, status="quarantined")
    assert "tombstoned" in checks(relearn)
    assert Fact.objects.filter(project=project, status="expired").exists()

    # Reviewers approved and rejected; a queue remains to work.
    actions = set(ReviewDecision.objects.filter(write__project=project).values_list("action", flat=True))
    assert {"approve", "reject", "edit_approve"} <= actions
    assert 5 <= writes.filter(status__in=["pending_review", "quarantined"]).count() <= 30

    # R2: nothing held back ever reached an agent's context.
    contexts = RetrievalEvent.objects.filter(project=project)
    assert not contexts.filter(context__icontains="Ignore previous instructions").exists()
    assert not contexts.filter(context__icontains="cat herder").exists()
    assert contexts.filter(context__contains="eu-west-2 (London)").exists()
    assert set(contexts.values_list("mode", flat=True)) == {"resume", "confirm", "new"}


@pytest.mark.django_db
def test_demo_users_log_in_and_a_second_run_changes_nothing() -> None:
    load()
    project = Project.objects.get(slug=DEMO_PROJECT)
    assert sorted(role for _, role in DEMO_USERS) == sorted(Role.values)
    for username, role in DEMO_USERS:
        user = User.objects.get(username=username)
        assert Membership.objects.get(user=user, project=project).role == role
        assert Client().login(username=username, password=DEMO_PASSWORD), username
    admin = User.objects.get(username=next(u for u, role in DEMO_USERS if role == "admin"))
    # A project admin by membership, not the platform operator.
    assert not admin.is_superuser and not admin.is_staff

    def counts() -> list[int]:
        return [
            model.objects.count()
            for model in (
                Project,
                User,
                Principal,
                Session,
                Fact,
                Write,
                ReviewDecision,
                RetrievalEvent,
                AuditEntry,
            )
        ]

    before = counts()
    output = load()
    assert "already exists" in output
    assert counts() == before


def test_the_plan_is_deterministic() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)

    def plan() -> list[tuple[str, object]]:
        builder = DemoBuilder(now=now)
        builder.plan_customers()
        builder.plan_developers()
        builder.plan_project()
        builder.plan_situations()
        return [(p.agent, p.request) for p in builder.planned]

    first = plan()
    assert first == plan()
    assert 250 <= len(first) <= 350
