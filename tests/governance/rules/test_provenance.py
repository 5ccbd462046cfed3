"""Source references and session/event ids stay opaque identifiers (R3, R10)."""

from __future__ import annotations

import pytest

from governance.rules.provenance import identifier_problem, ref_problem


@pytest.mark.parametrize(
    "ref", ["chat:1234", "https://docs.example.com/a?b=c#d", "ci.yml@main", "ticket 42", "agent:recap"]
)
def test_ordinary_refs_pass(ref: str) -> None:
    assert ref_problem(ref) is None


@pytest.mark.parametrize(
    "ref", ["", "  ", "a|b", "a]b", "<b>", "a\nb", "a\u200bb", "a\u202eb", "{x}", "`x`", "x" * 201]
)
def test_refs_that_could_forge_a_tag_or_hide_text_are_refused(ref: str) -> None:
    assert ref_problem(ref)


@pytest.mark.parametrize(
    "value", ["T", "s-1", "7c9e6679-7425-40de-944b-e07fc1f90ae7", "chat 12", "#1", "e.10"]
)
def test_identifiers_that_pass(value: str) -> None:
    assert identifier_problem(value, "session id") is None


@pytest.mark.parametrize("value", ["", " s", "s ", "a|b", "a]b", "a\nb", "é", "x" * 201, "a\u200bb"])
def test_identifiers_that_are_refused(value: str) -> None:
    assert identifier_problem(value, "session id")


def test_a_summary_ref_stays_within_the_limit_whatever_the_ids() -> None:
    from governance.rules.provenance import REF_MAX_CHARS, summary_ref

    assert summary_ref("s-1", "1", "9", session_pk=7) == "session:s-1#1..9"
    assert summary_ref("s" * 150, "e" * 100, "9", session_pk=7) == "session:" + "s" * 150
    assert summary_ref("s" * 200, "1", "9", session_pk=7) == "session:#7"
    for ref in (summary_ref("s" * 200, "e" * 200, "f" * 200, session_pk=123456),):
        assert len(ref) <= REF_MAX_CHARS and ref_problem(ref) is None
