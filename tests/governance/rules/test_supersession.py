"""Who may claim which source and who may replace whom (R4, R6, R7): pure rules."""

from __future__ import annotations

from typing import Any

import pytest

from governance.rules.supersession import (
    SOURCE_TYPES,
    Incumbent,
    claimable_sources,
    conflict_detail,
    effective_caps,
    may_supersede,
    quote,
    supersede_reason,
    supersession_rule,
)


def old(source_type: str = "user_statement", authority: int = 4, *, project: bool = False) -> Incumbent:
    return Incumbent(
        fact_id=7,
        statement="Lives in Berlin",
        source_type=source_type,
        authority=authority,
        is_project_fact=project,
    )


def test_an_agent_may_claim_every_source_but_reviewer_and_config_by_default() -> None:
    allowed = claimable_sources([], is_config_source=False)
    assert "reviewer" not in allowed and "config" not in allowed
    assert set(allowed) == set(SOURCE_TYPES) - {"reviewer", "config"}


def test_config_needs_the_mark_and_reviewer_is_never_claimable() -> None:
    assert "config" in claimable_sources([], is_config_source=True)
    assert claimable_sources(["reviewer", "config", "tool_output"], is_config_source=True) == (
        "config",
        "tool_output",
    )
    assert claimable_sources(["config"], is_config_source=False) == ()


def test_project_caps_override_the_defaults_and_ignore_nonsense() -> None:
    overrides: dict[str, Any] = {"web_page": 2, "chat_message": 9, "unknown": 3, "tool_output": "5"}
    caps = effective_caps(overrides)
    assert caps["web_page"] == 2
    assert caps["chat_message"] == 2  # out of range: the default stands
    assert "unknown" not in caps
    assert caps["tool_output"] == 3


@pytest.mark.parametrize(
    ("source", "authority", "incumbent", "expected"),
    [
        ("config", 1, old("documentation", 5, project=True), True),  # R7
        ("config", 4, old("user_statement", 5), False),  # R7 is about project facts only
        ("user_statement", 4, old("user_statement", 4), True),
        ("user_statement", 3, old("user_statement", 4), False),
        ("model_inference", 2, old("user_statement", 1), False),  # indirect never replaces direct
        ("model_inference", 2, old("web_page", 1), True),
        ("summarizer", 2, old("chat_message", 2), True),
        ("tool_output", 3, old("config", 3, project=True), False),
    ],
)
def test_may_supersede(source: str, authority: int, incumbent: Incumbent, expected: bool) -> None:
    assert may_supersede(source, authority, incumbent) is expected


def test_reasons_and_details_are_plain_words() -> None:
    detail = conflict_detail("model_inference", 2, old())
    assert detail == (
        "Would replace fact 7 (\u201cLives in Berlin\u201d); it waits because a model's inference never "
        "replaces the person's own words without a reviewer."
    )
    assert "R6" not in supersede_reason("user_statement", "chat:1", "city", old())
    assert supersede_reason("user_statement", "chat:1", "city", old()).startswith(
        "Evidence from the person's own words (chat:1) gives a different value for 'city'"
    )
    assert supersession_rule("config", old(project=True)) == "R7"
    assert supersession_rule("user_statement", old()) == "R6"
    assert quote("x" * 100) == "x" * 77 + "..."


def test_only_independent_evidence_refreshes_a_fact() -> None:
    from datetime import UTC, datetime

    from governance.rules.supersession import arrives_late, is_independent_evidence

    fact = Incumbent(
        fact_id=1,
        statement="I live in Leeds",
        source_type="user_statement",
        authority=4,
        is_project_fact=False,
        source_ref="chat:1",
        observed_at=datetime(2026, 1, 10, tzinfo=UTC),
    )
    assert is_independent_evidence("support_ticket", "zendesk:1", 4, derived=False, fact=fact)
    assert is_independent_evidence("user_statement", "chat:2", 4, derived=False, fact=fact)
    assert is_independent_evidence("reviewer", "review:1", 1, derived=False, fact=fact)
    assert not is_independent_evidence(
        "user_statement", "chat:1", 4, derived=False, fact=fact
    )  # itself again
    assert not is_independent_evidence("web_page", "agent:recap", 1, derived=False, fact=fact)  # weaker echo
    assert not is_independent_evidence(
        "support_ticket", "zendesk:1", 4, derived=True, fact=fact
    )  # from memory
    assert arrives_late(datetime(2026, 1, 9, tzinfo=UTC), fact)
    assert not arrives_late(datetime(2026, 1, 11, tzinfo=UTC), fact)
