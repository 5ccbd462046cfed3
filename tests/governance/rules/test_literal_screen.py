"""The literal screen in front of the guard's patterns skips only patterns that cannot match."""

from __future__ import annotations

import _sre  # the regex engine's own lowercase mapping
import json
import re
from pathlib import Path
from re import _casefix as casefix  # type: ignore[attr-defined]  # the engine's extra case pairs

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from governance.rules import guard
from governance.rules.literal_screen import LiteralScreen, fold_case, required_literals
from governance.rules.supersession import effective_caps

DATA = Path(__file__).resolve().parents[2] / "data" / "guard"
GUARD_PATTERNS = (*guard._INSTRUCTION_PATTERNS, *guard._MARKUP_PATTERNS)


def test_case_folding_holds_equal_what_ignorecase_holds_equal_for_every_code_point() -> None:
    # re.IGNORECASE compares by the simple lowercase mapping plus a few extra
    # classes (the long s and s, the dotless i and i); the screen must fold alike.
    wrong = []
    for code in range(0x110000):
        lower = _sre.unicode_tolower(code)
        same = min((lower, *casefix._EXTRA_CASES.get(lower, ())))
        if fold_case(chr(code)) != chr(same):
            wrong.append(hex(code))
    assert wrong == []


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        (r"\b(?:ignore|disregard)\s+rules\b", {"ignore", "disregard"}),
        (r"you\s+must\s+(?:answer|reply)", {"answer", "reply"}),
        (r"\bno\s+rules\b", {"rules"}),
        (r"(?:abc)?def", {"def"}),
        (r"(?:foo|)bar", {"bar"}),
        (r"x(?=hidden)", {"hidden"}),
        (r"abc(?!hidden)", {"abc"}),
        (r"(?:ab){2,}", {"ab"}),
        (r"IGNORE\s+ALL", {"ignore"}),
        (r"a*", None),
        (r"[abc]+\d", None),
        (r"(?:foo|)", None),
        (r"(?:ab)*|cd", None),
        (r"\w+\s+\w+", None),
    ],
)
def test_required_literals_are_read_off_the_parse_tree(pattern: str, literals: set[str] | None) -> None:
    found = required_literals(re.compile(pattern, re.IGNORECASE))
    assert (set(found) if found is not None else None) == literals


def test_a_pattern_without_required_literals_is_always_run() -> None:
    always, worded = re.compile(r"\w+\s+\w+"), re.compile(r"secret")
    screen = LiteralScreen([always, worded], lambda p: p)
    assert screen.candidates("nothing here") == [always]
    assert screen.candidates("a SECRET here") == [always, worded]


# Letters re.IGNORECASE holds equal to plain ones that ``str.lower`` does not
# turn into them: each must still let its pattern through the screen.
_LOOK_ALIKES = {"s": "\u017f", "i": "\u0131", "I": "\u0130", "k": "\u212a", "K": "\u212a"}


@st.composite
def _pattern_and_text(draw: st.DrawFn) -> tuple[guard._Pattern, str]:
    pattern = draw(st.sampled_from(GUARD_PATTERNS))
    # " zz" after the match satisfies a trailing negative lookahead
    # ("... remember this" not followed by the end), which Hypothesis cannot
    # otherwise generate for; the match itself is unchanged.
    body = draw(st.from_regex(re.compile(rf"(?:{pattern.regex.pattern}) zz", pattern.regex.flags)))
    swapped = "".join(
        _LOOK_ALIKES.get(ch, ch)
        if draw(st.booleans()) and ch in _LOOK_ALIKES
        else ch.swapcase()
        if draw(st.booleans())
        else ch
        for ch in body
    )
    around = st.text(max_size=20)
    return pattern, draw(around) + swapped + draw(around)


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(_pattern_and_text())
def test_every_text_a_guard_pattern_matches_passes_the_screen(case: tuple[guard._Pattern, str]) -> None:
    pattern, text = case
    assume(pattern.regex.search(text))
    screen = guard._MARKUP_SCREEN if pattern in guard._MARKUP_PATTERNS else guard._INSTRUCTION_SCREEN
    assert pattern in screen.candidates(text)


def _corpus() -> list[dict[str, str]]:
    lines = []
    for path in (DATA / "benign.jsonl", DATA / "attacks.jsonl", DATA / "fresh" / "lines.jsonl"):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines


def _everything_may_match(self: LiteralScreen[guard._Pattern], text: str) -> list[guard._Pattern]:
    return list(self._items)


def test_the_guard_finds_the_same_with_and_without_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    context = guard.GuardContext(source_caps=effective_caps({}), fingerprint_key=b"k" * 32)
    proposals = [
        guard.WriteProposal(
            statement=line["text"],
            kind=line.get("kind", "preference"),
            key=line.get("key"),
            has_principal=True,
            source_type=source_type,
            source_ref="chat:1",
            requested_authority=None,
        )
        for line in _corpus()
        for source_type in {line.get("source_type", "user_statement"), "web_page", "user_statement"}
    ]
    assert len(proposals) > 1500

    def judged() -> list[guard.GuardResult]:
        guard.clear_caches()
        return [guard.check_write(p, context, auto_approve_min_authority=50) for p in proposals]

    screened = judged()
    monkeypatch.setattr(LiteralScreen, "candidates", _everything_may_match)
    unscreened = judged()
    assert screened == unscreened
    # The corpus exercises the patterns: many of its lines are held for them.
    assert sum(1 for r in unscreened if r.flagged_for_injection) > 300
