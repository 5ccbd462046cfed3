"""Which of many regular expressions could match a text, found in one pass over it.

The write guard scans each statement with a few dozen case-insensitive
patterns, several times over (as written, its split sentences, and its rot13
and backwards readings). Most ordinary statements match none of them, and
Python's ``re`` scans the whole text for each pattern to find that out: more
than half the guard's time per write (docs/performance.md, "The guard's
patterns screened").

Most patterns cannot match without one of a few words appearing somewhere:
"ignore previous instructions" needs one of "ignore", "disregard",
"forget", ... ``required_literals`` reads that set off the pattern's own
parse tree, so it cannot drift from the pattern. ``LiteralScreen`` looks for
every pattern's words at once (Aho-Corasick, from pyahocorasick), and a
pattern none of whose words occur is not run. It is a necessary condition
only: a pattern that may match is run exactly as before, so the screen
changes how fast the guard answers, never what it finds. A pattern with no
such set (everything in it optional, say) is always run.

The parse tree and the case classes come from CPython's own ``re`` internals
(``re._parser``, ``re._casefix``), which are private: the project is pinned to
Python 3.11 (pyproject.toml), and tests/governance/rules/test_literal_screen.py
fails if a change to them would let a match past the screen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

# Private modules, which some releases of typeshed describe and others do not:
# whichever mypy runs, the ignore is neither missing nor unused.
from re import _casefix as casefix  # type: ignore[attr-defined, unused-ignore]  # extra case pairs
from re import _constants as sre  # type: ignore[attr-defined, unused-ignore]  # the parse tree's opcodes
from re import _parser as sre_parse  # type: ignore[attr-defined, unused-ignore]  # what re.compile uses
from typing import Generic, TypeVar

import ahocorasick

# A set of strings, one of which every match of a pattern contains (case folded).
Literals = frozenset[str]

T = TypeVar("T")

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


# ``re.IGNORECASE`` compares a text's character with a pattern's by the simple
# lowercase mapping, plus a few classes of letters it also holds equal ("s"
# and the long s U+017F, "i" and the dotless i U+0131, the Greek sigmas): each
# class is folded to one member, for the text and the patterns alike.
_SAME_CLASS = {
    code: least for code, others in casefix._EXTRA_CASES.items() if (least := min((code, *others))) != code
}
# The one character whose full lowercase (``str.lower``) is not its simple one:
# capital I with a dot is "i" to ``re`` but "i" and a combining dot to ``str.lower``.
# tests/governance/rules/test_literal_screen.py checks every code point against ``re``'s own mapping.
_BEFORE_LOWER = {0x130: 0x69}


def fold_case(text: str) -> str:
    """``text`` with every character replaced by what ``re.IGNORECASE`` holds it equal to."""
    if text.isascii():
        return text.lower()
    return text.translate(_BEFORE_LOWER).lower().translate(_SAME_CLASS)


def required_literals(pattern: re.Pattern[str]) -> Literals | None:
    """Strings of which every match of ``pattern`` contains at least one, case folded.

    None when the parse tree gives no such set (a pattern whose every part
    is optional, or made of character classes only).
    """
    found = _sequence(sre_parse.parse(pattern.pattern, pattern.flags))
    return frozenset(fold_case(literal) for literal in found) if found else None


def _sequence(items: Iterable[tuple[object, object]]) -> set[str] | None:
    """The best required set of a sequence of parse-tree items.

    Every item the sequence must match gives one (a run of plain letters,
    a group, a branch whose every side gives one, a repeat of at least one);
    any of them is required for the whole, and the one whose shortest string
    is longest (then the one with fewest strings) screens best.
    """
    choices: list[set[str]] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            choices.append({"".join(run)})
            run.clear()

    for op, value in items:
        if op is sre.LITERAL:
            assert isinstance(value, int)
            run.append(chr(value))
            continue
        if op is sre.AT:
            # \b, ^ and $ match no character: the letters either side stay adjacent.
            continue
        end_run()
        inner: set[str] | None = None
        if op is sre.SUBPATTERN:
            assert isinstance(value, tuple)
            inner = _sequence(value[3])
        elif op is sre.ATOMIC_GROUP:
            inner = _sequence(value)  # type: ignore[arg-type]  # a SubPattern, iterable as items
        elif op is sre.ASSERT:
            # A lookahead or lookbehind must match the text beside the position too.
            assert isinstance(value, tuple)
            inner = _sequence(value[1])
        elif op is sre.BRANCH:
            assert isinstance(value, tuple)
            sides = [_sequence(side) for side in value[1]]
            if all(sides):
                inner = set().union(*sides)  # type: ignore[arg-type]  # no side is None here
        elif op in _REPEATS:
            assert isinstance(value, tuple)
            if value[0] >= 1:
                inner = _sequence(value[2])
        # Character classes, any character, back-references, negative
        # lookarounds: nothing required, and the run of letters ends.
        if inner:
            choices.append(inner)
    end_run()
    if not choices:
        return None
    return max(choices, key=lambda literals: (min(map(len, literals)), -len(literals)))


class LiteralScreen(Generic[T]):
    """Tells, in one pass over a text, which of its items' patterns could match it.

    ``items`` are whatever carries the patterns (the guard's own records);
    ``candidates`` gives back those that must still be run, in their order.
    """

    def __init__(self, items: Sequence[T], pattern_of: Callable[[T], re.Pattern[str]]) -> None:
        self.entries = tuple((item, pattern_of(item)) for item in items)
        self._always = 0  # a bit per item, by position
        by_literal: dict[str, int] = {}
        for position, (_, pattern) in enumerate(self.entries):
            literals = required_literals(pattern)
            if literals is None:
                self._always |= 1 << position
                continue
            for literal in literals:
                by_literal[literal] = by_literal.get(literal, 0) | 1 << position
        # None when no pattern has literals (an automaton without words cannot be searched).
        self._automaton: ahocorasick.Automaton | None = None
        if by_literal:
            self._automaton = ahocorasick.Automaton()
            for literal, positions in by_literal.items():
                self._automaton.add_word(literal, positions)
            self._automaton.make_automaton()
        self._every = (1 << len(self.entries)) - 1

    def candidates(self, text: str) -> list[T]:
        """The items whose pattern may match ``text``; every other one's certainly does not."""
        found = self._always
        if self._automaton is not None:
            for _, positions in self._automaton.iter(fold_case(text)):
                found |= positions
                if found == self._every:
                    break  # a long text names every pattern's words early: stop reading
        return [item for position, (item, _) in enumerate(self.entries) if found >> position & 1]
