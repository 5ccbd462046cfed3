"""Every text check runs in linear time on the largest input the API accepts.

Memory content and the text an agent sends are attacker-controlled: one
request with a 100,000-letter word once held a web worker until it was
killed. Each check gets adversarial inputs at the maximum accepted size and
must finish within 250 ms. Run with ``-s`` to see the timings.

The best of five runs is measured, in the CPU time of the thread that runs
the check, so that a busy machine (the suite shares its cores with its other
process and whatever else runs) does not fail a check that is fast: waiting
for a core is not counted. A quadratic check misses the budget by seconds,
not milliseconds. The budget leaves room for the machine: the slowest check
(the summary check on dense issue numbers) took 50 ms of CPU alone on 6
December 2026 and 101 ms inside the suite that day, where 100 ms had been
the budget; the CPU time of one thread still grows when the other core is
busy.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from governance.rules.diff import word_diff
from governance.rules.summaries import MAX_SOURCE_CHARS, MAX_SUMMARY_CHARS, check_summary
from governance.rules.text import (
    MAX_STATEMENT_CHARS,
    near_duplicate,
    normalise_statement,
    similarity,
    statement_fingerprint,
)

BUDGET_SECONDS = 0.250

# Every character class: ASCII punctuation, digits, letters, whitespace and
# controls, Latin-1, combining marks, Cyrillic and Greek look-alikes,
# zero-width and bidi controls, CJK, emoji, tag characters.
EVERY_CLASS = (
    "".join(chr(c) for c in range(1, 128))
    + "\u00e9\u00df\u0130\u0131\u017f\u212a\ufb01\u0301\u0308"  # Latin oddities, combining marks
    + "\u0430\u0435\u043e\u0440\u0441\u0391\u0392\u0395"  # Cyrillic and Greek look-alikes
    + "\u200b\u200d\u202e\u2066\ufeff"  # zero-width and bidi controls
    + "\u6f22\u5b57\u304b\u306a\u3131\U0001f600\U0001f44d\U0001f3fd\U000e0041"  # CJK, emoji, tag
)

ADVERSARIAL: dict[str, str] = {
    "one long word": "a",
    "AB12- repeated": "AB12-",
    "long number": "1",
    "repeated hyphens": "-",
    "repeated dots": ".",
    "repeated spaces": " ",
    "repeated newlines": "\n",
    "word-hyphen chain": "a-",
    "word-dot chain": "a.",
    "digit-dot chain": "1.",
    "digit-comma chain": "1,",
    "slash path chain": "a/",
    "at-sign chain": "a@",
    "url scheme chain": "http://",
    "ticket chain": "ab-1",
    "nested round brackets": "(",
    "nested mixed brackets": "([{<",
    "every character class": EVERY_CLASS,
    "dense numbers": "1 ",
    "dense dates": "3 March 2025 ",
    "dense times": "6pm ",
    "dense issue numbers": "#1",
    "dense negations": "not ",
    "dense failures": "still pending ",
    "dense titles": "senior ",
    "dense names": "Alice Chen ",
    "apostrophes": "a's ",
    "realistic transcript": "Alice Chen (CTO) asked us never to call after 6pm; deploy v1.4.2 to eu-west-2 "
    "by 3 March 2025, ticket OPS-4411 still failing, email alice@example.com. ",
}


def _fill(unit: str, size: int) -> str:
    """``unit`` repeated to exactly ``size`` characters (nested brackets close)."""
    if unit in ("(", "([{<"):
        closing = unit[::-1].translate(str.maketrans("([{<", ")]}>"))
        half = size // 2 // len(unit)
        return (unit * half + closing * half).ljust(size, "x")
    return (unit * (size // len(unit) + 1))[:size]


def _best_of_five(check: Callable[[], object]) -> float:
    timings = []
    for _ in range(5):
        started = time.thread_time()
        check()
        timings.append(time.thread_time() - started)
    return min(timings)


def _assert_within_budget(name: str, check: Callable[[], object]) -> None:
    elapsed = _best_of_five(check)
    print(f"\n  {name}: {elapsed * 1000:.1f} ms", end="")
    assert elapsed < BUDGET_SECONDS, f"{name} took {elapsed * 1000:.0f} ms"


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_summary_check_is_linear_on_the_largest_source_and_summary(name: str) -> None:
    source = _fill(ADVERSARIAL[name], MAX_SOURCE_CHARS)
    # The summary shares the pattern but differs from the source, so every
    # source item has to be looked up in it.
    summary = _fill(ADVERSARIAL[name][::-1] + " 7 ", MAX_SUMMARY_CHARS)
    _assert_within_budget(f"check_summary[{name}]", lambda: check_summary(summary, source))


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_summary_check_is_linear_when_the_summary_is_the_adversary(name: str) -> None:
    summary = _fill(ADVERSARIAL[name], MAX_SUMMARY_CHARS)
    source = _fill(ADVERSARIAL["realistic transcript"], MAX_SOURCE_CHARS)
    _assert_within_budget(f"check_summary[summary: {name}]", lambda: check_summary(summary, source))


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_statement_checks_are_linear_on_the_longest_statement(name: str) -> None:
    old = _fill(ADVERSARIAL[name], MAX_STATEMENT_CHARS)
    # Shifted and edited copies of a repetitive text are SequenceMatcher's
    # worst case (a minute at this size before the diff was bounded).
    new = _fill("b " + ADVERSARIAL[name][::-1] + " x ", MAX_STATEMENT_CHARS)
    _assert_within_budget(f"word_diff[{name}]", lambda: word_diff(old, new))
    _assert_within_budget(
        f"text[{name}]",
        lambda: (
            normalise_statement(old),
            similarity(old, new),
            near_duplicate(old, new),
            statement_fingerprint(old, b"key"),
        ),
    )
