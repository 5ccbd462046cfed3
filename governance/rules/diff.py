"""Word-level diff of two statements, for the review queue's side-by-side view.

Pure function over strings. The output is plain data (operation, text) that
the template renders with auto-escaping: the statements are attacker-
controlled, so no HTML is ever built here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

Op = Literal["equal", "delete", "insert"]

# Words and the whitespace between them are both tokens, so joining a side's
# segments gives back exactly the original statement.
_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    op: Op
    text: str


@dataclass(frozen=True)
class SideBySide:
    old: tuple[Segment, ...]
    new: tuple[Segment, ...]

    @property
    def changed(self) -> bool:
        return any(s.op != "equal" for s in (*self.old, *self.new))


def _merge(segments: list[Segment]) -> tuple[Segment, ...]:
    """Join neighbours with the same operation so the template emits few elements."""
    merged: list[Segment] = []
    for segment in segments:
        if merged and merged[-1].op == segment.op:
            merged[-1] = Segment(segment.op, merged[-1].text + segment.text)
        else:
            merged.append(segment)
    return tuple(merged)


def word_diff(old: str, new: str) -> SideBySide:
    """The old statement with deletions marked and the new one with insertions marked."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    # autojunk off: statements are short, and its heuristic would treat common
    # words as junk and produce a diff that is harder for a person to read.
    matcher = SequenceMatcher(a=a, b=b, autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            left.append(Segment("equal", "".join(a[i1:i2])))
            right.append(Segment("equal", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(Segment("insert", "".join(b[j1:j2])))
    return SideBySide(old=_merge(left), new=_merge(right))
