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
    # A screen none of whose patterns requires a word runs them all.
    assert LiteralScreen([always], lambda p: p).candidates("anything") == [always]


# Letters re.IGNORECASE holds equal to plain ones (the long s, the dotless i,
# capital I with a dot, the Kelvin sign): a statement written with them must
# still let its pattern through the screen.
_LOOK_ALIKES = {"s": "\u017f", "i": "\u0131", "I": "\u0130", "k": "\u212a", "K": "\u212a"}


# Every screen the guard keeps, each pattern with the screen that picks it.
SCREENED = [
    (screen, item, pattern)
    for screen in vars(guard).values()
    if isinstance(screen, LiteralScreen)
    for item, pattern in screen.entries
]


def test_the_property_below_covers_every_pattern_family_the_guard_screens() -> None:
    screened = {id(pattern) for _, _, pattern in SCREENED}
    families = (guard._INSTRUCTION_PATTERNS, guard._MARKUP_PATTERNS, guard._REVIEWER_PATTERNS)
    assert {id(p.regex) for family in families for p in family} <= screened
    assert {id(guard._SEND_DATA_TO_LINK), id(guard._MOVE_DATA), id(guard._BCC)} <= screened


@st.composite
def _screened_text(draw: st.DrawFn) -> tuple[LiteralScreen[object], object, re.Pattern[str], str]:
    screen, item, pattern = draw(st.sampled_from(SCREENED))
    # " zz" after the match satisfies a trailing negative lookahead
    # ("... remember this" not followed by the end), which Hypothesis cannot
    # otherwise generate for; the match itself is unchanged.
    body = draw(st.from_regex(re.compile(rf"(?:{pattern.pattern}) zz", pattern.flags)))
    swapped = "".join(
        _LOOK_ALIKES.get(ch, ch)
        if draw(st.booleans()) and ch in _LOOK_ALIKES
        else ch.swapcase()
        if draw(st.booleans())
        else ch
        for ch in body
    )
    around = st.text(max_size=20)
    return screen, item, pattern, draw(around) + swapped + draw(around)


@settings(
    max_examples=800,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(_screened_text())
def test_every_text_a_guard_pattern_matches_passes_the_screen(
    case: tuple[LiteralScreen[object], object, re.Pattern[str], str],
) -> None:
    screen, item, pattern, text = case
    assume(pattern.search(text))
    assert item in screen.candidates(text)


def _corpus() -> list[dict[str, str]]:
    lines = []
    for path in (DATA / "benign.jsonl", DATA / "attacks.jsonl", DATA / "fresh" / "lines.jsonl"):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines


def _everything_may_match(self: LiteralScreen[object], text: str) -> list[object]:
    return [item for item, _ in self.entries]


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
