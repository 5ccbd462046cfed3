"""Policy diffs and project source caps (pure)."""

from __future__ import annotations

from governance.rules.guard import DEFAULT_SOURCE_CAPS
from governance.rules.policy import PolicySettings
from governance.rules.policy_changes import FieldChange, diff_settings, validate_source_caps


def test_diff_lists_changed_fields_in_policy_order():
    before = PolicySettings()
    after = PolicySettings(confirm_days=10, token_budget=400)
    assert diff_settings(before, after) == [
        FieldChange("token_budget", 600, 400),
        FieldChange("confirm_days", 30, 10),
    ]


def test_diff_ignores_kind_order_and_lists_nothing_for_a_first_version():
    before = PolicySettings(per_round_kinds=("episodic", "slot"))
    after = PolicySettings(per_round_kinds=("slot", "episodic"))
    assert diff_settings(before, after) == []
    assert diff_settings(None, after) == []
    assert diff_settings(PolicySettings(), PolicySettings(per_round_kinds=())) == [
        FieldChange("per_round_kinds", ["episodic"], [])
    ]


def test_source_caps_store_only_overrides():
    caps, errors = validate_source_caps({**DEFAULT_SOURCE_CAPS, "web_page": 2, "chat_message": 2})
    assert errors == {}
    assert caps == {"web_page": 2}


def test_source_caps_refuse_unknown_sources_and_out_of_range_values():
    caps, errors = validate_source_caps({"web_page": 6, "tool_output": True, "rumour": 3})
    assert caps == {}
    assert errors == {
        "web_page": ["Authority runs from 1 to 5."],
        "tool_output": ["Authority runs from 1 to 5."],
        "rumour": ["Unknown source type 'rumour'."],
    }
