"""governance.rules.withdrawal: what an agent may withdraw, and which copies a withdrawal keeps (R8)."""

from __future__ import annotations

import pytest

from governance.models.facts import FactStatus
from governance.rules.withdrawal import agent_reason, agent_refusal, keeps_copy

ALLOWED = ("active", "superseded", "expired", "out_of_scope")


@pytest.mark.parametrize("status", ALLOWED)
def test_an_agent_may_withdraw_a_persons_memory_in_any_settled_state(status):
    assert agent_refusal(status=status, source_type="user_statement", has_principal=True) is None


@pytest.mark.parametrize("status", ["pending_review", "quarantined", "rejected"])
def test_an_agent_may_not_withdraw_what_a_reviewer_holds(status):
    refusal = agent_refusal(status=status, source_type="user_statement", has_principal=True)
    assert refusal is not None and refusal.code == "under_review"
    assert "only a reviewer can remove it" in refusal.message


def test_project_facts_and_configuration_are_not_an_agents_to_withdraw():
    project = agent_refusal(status="active", source_type="config", has_principal=False)
    config = agent_refusal(status="active", source_type="config", has_principal=True)
    assert project is not None and project.code == "project_fact"
    assert config is not None and config.code == "configuration"


def test_every_status_is_either_allowed_or_refused_in_plain_words():
    for status in FactStatus.values:
        if status == "withdrawn":
            continue
        refusal = agent_refusal(status=status, source_type="chat_message", has_principal=True)
        assert (refusal is None) == (status in ALLOWED), status
        if refusal is not None:
            assert "R8" not in refusal.message and refusal.message.endswith(".")


@pytest.mark.parametrize(
    ("status", "by_agent", "kept"),
    [
        ("quarantined", True, True),
        ("rejected", True, True),
        ("pending_review", True, False),
        ("superseded", True, False),
        ("quarantined", False, False),
        ("rejected", False, False),
    ],
)
def test_only_an_agent_leaves_blocked_copies_behind(status, by_agent, kept):
    assert keeps_copy(status, by_agent=by_agent) is kept


def test_the_recorded_reason_says_it_was_the_persons_request():
    assert agent_reason("  forget my address ") == "On the person's request: forget my address"
