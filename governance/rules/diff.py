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


# SequenceMatcher is roughly cubic in the worst case (4,000 characters of
# repeated words took a minute), so it only sees what differs after the common
# start and end are taken off, and only while that part is small; a larger
# change is shown as one deletion and one insertion. 100 x 100 words takes a
# few milliseconds at worst, and a reviewer's edit is usually a few words.
MAX_DIFF_CELLS = 10_000


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    a_end, b_end = len(a) - suffix, len(b) - suffix
    ops: list[tuple[str, int, int, int, int]] = []
    if prefix:
        ops.append(("equal", 0, prefix, 0, prefix))
    if (a_end - prefix) * (b_end - prefix) <= MAX_DIFF_CELLS:
        # autojunk off: statements are short, and its heuristic would treat
        # common words as junk and produce a diff that is harder to read.
        matcher = SequenceMatcher(a=a[prefix:a_end], b=b[prefix:b_end], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            ops.append((tag, i1 + prefix, i2 + prefix, j1 + prefix, j2 + prefix))
    elif a_end > prefix or b_end > prefix:
        ops.append(("replace", prefix, a_end, prefix, b_end))
    if suffix:
        ops.append(("equal", a_end, len(a), b_end, len(b)))
    return ops


def word_diff(old: str, new: str) -> SideBySide:
    """The old statement with deletions marked and the new one with insertions marked."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    left: list[Segment] = []
    right: list[Segment] = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            left.append(Segment("equal", "".join(a[i1:i2])))
            right.append(Segment("equal", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(Segment("insert", "".join(b[j1:j2])))
    return SideBySide(old=_merge(left), new=_merge(right))
