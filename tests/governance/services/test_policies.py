"""services.policies: drafts, publishing immutable versions, rollback, source caps (issue 5)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import DatabaseError, connection, transaction

from governance.models import Agent, AuditEntry, PolicyDraft, PolicyVersion, Project
from governance.rules.policy import PolicySettings
from governance.selectors.audit import verify_chain
from governance.services import audit, policies
from tests.personas import make_agent, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot(project: Project) -> Agent:
    return make_agent(project, "support-bot").agent


def active_version(agent: Agent) -> PolicyVersion:
    agent.refresh_from_db()
    assert agent.active_policy is not None
    return agent.active_policy


def test_save_draft_applies_changes_to_the_active_values_and_audits(bot, policy_editor):
    draft = policies.save_draft(bot, {"confirm_days": 10, "token_budget": 400}, user=policy_editor)

    assert draft.policy == PolicySettings(confirm_days=10, token_budget=400)
    assert draft.based_on == active_version(bot)
    assert draft.updated_by == policy_editor
    assert active_version(bot).version == 1  # nothing published yet
    entry = AuditEntry.objects.get(action="policy.draft_saved")
    assert entry.actor_user == policy_editor
    assert entry.data["changes"] == {
        "token_budget": {"from": 600, "to": 400},
        "confirm_days": {"from": 30, "to": 10},
    }


def test_saving_again_replaces_the_draft_starting_from_the_active_version(bot, policy_editor):
    policies.save_draft(bot, {"confirm_days": 10}, user=policy_editor)
    draft = policies.save_draft(bot, {"recent_days": 3}, user=policy_editor)
    # PUT semantics: fields left out keep the active values, not the old draft's.
    assert draft.policy == PolicySettings(recent_days=3)
    assert PolicyDraft.objects.filter(agent=bot).count() == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"confirm_days": 5}, "confirm_days"),  # not above recent_days (7)
        ({"weight_relevance": 0, "weight_freshness": 0, "weight_confidence": 0}, "weight_relevance"),
        ({"weight_freshness": -0.1}, "weight_freshness"),
        ({"token_budget": 200_000}, "token_budget"),  # beyond the tokenizer model's context
        ({"encoding": "gpt2"}, "encoding"),
        ({"recent_days": "soon"}, "recent_days"),
        ({"per_round_kinds": ["episodic"], "allowed_kinds": ["profile"]}, "per_round_kinds"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_invalid_changes_explain_themselves_and_save_nothing(bot, policy_editor, changes, field):
    with pytest.raises(policies.InvalidPolicy) as caught:
        policies.save_draft(bot, changes, user=policy_editor)
    assert field in caught.value.errors
    assert not PolicyDraft.objects.filter(agent=bot).exists()
    assert not AuditEntry.objects.filter(action="policy.draft_saved").exists()


def test_publish_makes_a_new_immutable_version_active_and_audits_the_reason(bot, policy_editor):
    policies.save_draft(bot, {"confirm_days": 10}, user=policy_editor)

    version = policies.publish_draft(bot, "  Stale memory confused users  ", user=policy_editor)

    assert isinstance(version, PolicyVersion)
    assert version.version == 2
    assert version.policy == PolicySettings(confirm_days=10)
    assert (version.reason, version.created_by) == ("Stale memory confused users", policy_editor)
    assert active_version(bot) == version
    assert PolicyVersion.objects.get(agent=bot, version=1).policy == PolicySettings()
    assert not PolicyDraft.objects.filter(agent=bot).exists()
    entry = AuditEntry.objects.get(action="policy.published")
    assert (entry.reason, entry.actor_user, entry.object_id) == (
        "Stale memory confused users",
        policy_editor,
        str(version.pk),
    )
    assert entry.data["changes"] == {"confirm_days": {"from": 30, "to": 10}}
    assert verify_chain(bot.project_id) is None


def test_versions_cannot_be_edited_in_the_database(bot):
    version = active_version(bot)
    with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic():
        PolicyVersion.objects.filter(pk=version.pk).update(reason="rewritten")


@pytest.mark.parametrize("reason", ["", "   "])
def test_publish_needs_a_reason(bot, policy_editor, reason):
    policies.save_draft(bot, {"confirm_days": 10}, user=policy_editor)
    with pytest.raises(policies.ReasonRequired):
        policies.publish_draft(bot, reason, user=policy_editor)
    assert active_version(bot).version == 1


def test_publish_without_a_draft_or_with_an_unchanged_one_is_refused(bot, policy_editor):
    with pytest.raises(policies.NoDraft):
        policies.publish_draft(bot, "why not", user=policy_editor)
    policies.save_draft(bot, {"confirm_days": 30}, user=policy_editor)  # equal to the active values
    with pytest.raises(policies.NothingToChange):
        policies.publish_draft(bot, "why not", user=policy_editor)
    assert PolicyVersion.objects.filter(agent=bot).count() == 1


def test_a_draft_made_before_another_publish_is_stale(bot, policy_editor, project):
    version_1 = active_version(bot)
    other_editor = make_user("quinn", "policy_editor", project)
    policies.save_draft(bot, {"token_budget": 500}, user=other_editor)
    policies.publish_draft(bot, "Smaller budget", user=other_editor)
    # A draft saved on version 1, before that publish (as an open console tab would have).
    PolicyDraft.objects.create(
        agent=bot, settings=PolicySettings(recent_days=3).to_dict(), based_on=version_1
    )

    with pytest.raises(policies.StaleDraft, match=r"version 1.*version 2"):
        policies.publish_draft(bot, "Fresher", user=policy_editor)
    # Publishing it would have silently undone the budget change.
    assert active_version(bot).policy.token_budget == 500


def test_rollback_is_a_new_version_equal_to_the_old_one(bot, policy_editor):
    original = active_version(bot)
    policies.save_draft(bot, {"confirm_days": 10, "max_items": 5}, user=policy_editor)
    policies.publish_draft(bot, "Tighter", user=policy_editor)

    rolled = policies.rollback(bot, 1, "Tighter lost answers", user=policy_editor)

    assert rolled.version == 3
    assert rolled.settings == original.settings
    assert rolled.policy == original.policy
    assert rolled.rolled_back_from == original
    assert active_version(bot) == rolled
    assert list(
        PolicyVersion.objects.filter(agent=bot).order_by("version").values_list("version", flat=True)
    ) == [
        1,
        2,
        3,
    ]
    entry = AuditEntry.objects.get(action="policy.rolled_back")
    assert (entry.reason, entry.data["rolled_back_to"], entry.data["previous"]) == (
        "Tighter lost answers",
        1,
        2,
    )


def test_rollback_to_what_is_active_or_to_nothing_is_refused(bot, policy_editor):
    with pytest.raises(policies.NothingToChange):
        policies.rollback(bot, 1, "again", user=policy_editor)
    with pytest.raises(policies.UnknownVersion):
        policies.rollback(bot, 7, "from the future", user=policy_editor)
    with pytest.raises(policies.ReasonRequired):
        policies.rollback(bot, 1, "", user=policy_editor)


def test_discard_draft(bot, policy_editor):
    assert policies.discard_draft(bot, user=policy_editor) is False
    policies.save_draft(bot, {"confirm_days": 10}, user=policy_editor)
    assert policies.discard_draft(bot, user=policy_editor) is True
    assert not PolicyDraft.objects.filter(agent=bot).exists()
    assert AuditEntry.objects.filter(action="policy.draft_discarded").count() == 1


def test_source_caps_store_overrides_with_a_reason(project, policy_editor):
    admin = make_user("ada", "admin", project)
    policies.set_source_caps(project, {"web_page": 2}, "Our wiki is curated", user=admin)
    project.refresh_from_db()
    assert project.source_caps == {"web_page": 2}
    entry = AuditEntry.objects.get(action="project.source_caps_changed")
    assert entry.data == {
        "from": {},
        "to": {"web_page": 2},
        "widening": ["Web page may carry authority 2 (was 1)."],
        "approved_by": None,
    }
    with pytest.raises(policies.InvalidPolicy) as caught:
        policies.set_source_caps(project, {"web_page": 9}, "More", user=policy_editor)
    assert "web_page" in caught.value.errors
    project.refresh_from_db()
    assert project.source_caps == {"web_page": 2}


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_publishes_make_one_version(project, monkeypatch):
    bot = make_agent(project, "race-bot").agent
    pat = make_user("pat", "policy_editor", project)
    quinn = make_user("quinn", "policy_editor", project)
    policies.save_draft(bot, {"confirm_days": 10}, user=pat)
    # Hold the first publisher inside its transaction so the second arrives while the agent is locked.
    real_record = audit.record

    def slow_record(*args, **kwargs):
        time.sleep(0.3)
        return real_record(*args, **kwargs)

    monkeypatch.setattr(audit, "record", slow_record)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def publish(user) -> None:
        barrier.wait()
        try:
            policies.publish_draft(bot, f"{user.username} publishes", user=user)
            outcomes.append("published")
        except policies.NoDraft:
            outcomes.append("no draft")
        finally:
            connection.close()

    threads = [threading.Thread(target=publish, args=(user,)) for user in (pat, quinn)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == ["no draft", "published"]
    assert list(
        PolicyVersion.objects.filter(agent=bot).values_list("version", flat=True).order_by("version")
    ) == [
        1,
        2,
    ]
