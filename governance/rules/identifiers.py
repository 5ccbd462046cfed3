"""Identifying values of a statement, kept as keyed hashes on a tombstone (R8). Pure: no ORM.

A tombstone's statement fingerprint catches the same assertion again, but
not a rewording: "The user mentioned their home is 12 Elm Street in
Springfield." after "I live at 12 Elm Street, Springfield." was withdrawn.
What a person asked to forget is usually the identifying details (an
address, a phone number, an e-mail address, a name), so a tombstone also
keeps an HMAC, with the tombstone key, of each such value, and a new
statement carrying enough of the same values is blocked like a repeat.
Neither the text nor an embedding is kept; without the key the hashes
cannot be checked against guesses.

Common values alone must not block ordinary statements: a bare small number
or a city is shared by countless true statements. Each value has a weight
and a statement is blocked only when the values it shares with one
tombstone reach ``BLOCK_WEIGHT``:

- strong (an e-mail address, a phone number, a street address with its
  number, a long identifier such as an account number): enough alone;
- a person's full name (two or more capitalised words): three quarters, so
  it needs another value beside it (a place, a number);
- a place name or a short number: a quarter.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from collections.abc import Iterable, Mapping

from governance.rules.text import fold_confusables

STRONG = 1.0
NAME = 0.75
WEAK = 0.25
BLOCK_WEIGHT = 1.0
# A tombstone keeps at most this many value hashes: a long statement's tail
# is not what made it identifying, and the row stays small.
MAX_VALUES = 24

KIND_WEIGHTS: Mapping[str, float] = {
    "email": STRONG,
    "phone": STRONG,
    "address": STRONG,
    "identifier": STRONG,
    "name": NAME,
    "place": WEAK,
    "number": WEAK,
}
KIND_LABELS: Mapping[str, str] = {
    "email": "e-mail address",
    "phone": "phone number",
    "address": "street address",
    "identifier": "identifying number",
    "name": "name",
    "place": "place",
    "number": "number",
}

_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+")
_PHONE = re.compile(r"(?<![\w.])\+?\d[\d ()\-.]{6,}\d(?!\w|\.\d)")
_STREET_TYPES = {
    "street": "st",
    "st": "st",
    "road": "rd",
    "rd": "rd",
    "avenue": "ave",
    "ave": "ave",
    "lane": "ln",
    "ln": "ln",
    "drive": "dr",
    "dr": "dr",
    "boulevard": "blvd",
    "blvd": "blvd",
    "close": "close",
    "court": "ct",
    "ct": "ct",
    "place": "pl",
    "pl": "pl",
    "way": "way",
    "crescent": "cres",
    "terrace": "terrace",
    "square": "sq",
    "sq": "sq",
    "gardens": "gardens",
    "row": "row",
    "hill": "hill",
}
_ADDRESS = re.compile(
    r"\b(?P<number>\d{1,5}[a-z]?)(?:,)?\s+(?P<street>(?:[A-Z][\w'\-]*\s+){1,3})(?P<type>"
    + "|".join(sorted(_STREET_TYPES, key=len, reverse=True))
    + r")\b\.?",
    re.IGNORECASE,
)
_LONG_NUMBER = re.compile(r"(?<![\w.])\d[\d\-]{4,}\d(?!\w|\.\d)")
_SHORT_NUMBER = re.compile(r"(?<![\w.:/\-])\d{2,4}(?![\w:/\-]|\.\d)")
_CAPITALISED = re.compile(r"\b[A-Z][a-z'\-]+(?:\s+[A-Z][a-z'\-]+)*")
# Capitalised words that start sentences or name calendar things, not people or places.
_NOT_NAMES = frozenset(
    str.split(
        """the a an i i'm i've my we our you your he she they it this that there here his her their
    user users customer please also then and but or so if when while after before on in at to
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december today tomorrow yesterday"""
    )
)


def _norm(text: str) -> str:
    return " ".join(fold_confusables(unicodedata.normalize("NFKC", text)).casefold().split())


def identifying_values(statement: str) -> dict[str, str]:
    """``{"kind:value": kind}`` for each identifying value in ``statement``, canonicalised.

    Canonical forms make rewordings meet: "12 Elm Street" and "12 elm st."
    are one address; "+44 (0)113 496 0000" and "0113 496 0000" differ (a
    phone number is matched digit for digit after dropping punctuation).
    """
    text = unicodedata.normalize("NFKC", statement)
    found: dict[str, str] = {}
    taken: list[tuple[int, int]] = []

    def add(kind: str, value: str, span: tuple[int, int]) -> None:
        found.setdefault(f"{kind}:{value}", kind)
        taken.append(span)

    def free(span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in taken)

    for m in _EMAIL.finditer(text):
        add("email", _norm(m.group(0)), m.span())
    for m in _ADDRESS.finditer(text):
        if not free(m.span()):
            continue
        street = _norm(m.group("street"))
        kind = _STREET_TYPES[m.group("type").casefold()]
        add("address", f"{m.group('number').casefold()} {street} {kind}", m.span())
        add("place", f"{street} {kind}", m.span())
    for m in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 7 <= len(digits) <= 15 and free(m.span()):
            add("phone", digits, m.span())
    for m in _LONG_NUMBER.finditer(text):
        if free(m.span()):
            add("identifier", re.sub(r"\D", "", m.group(0)), m.span())
    for m in _SHORT_NUMBER.finditer(text):
        if free(m.span()):
            add("number", m.group(0), m.span())
    for m in _CAPITALISED.finditer(text):
        words = [w for w in m.group(0).split() if w.casefold() not in _NOT_NAMES]
        if not words or not free(m.span()):
            continue
        if len(words) == 1 and _sentence_start(text, m.start()):
            continue  # "Call me", "Springfield is": one capitalised word opening a sentence
        last = words[-1].casefold()
        if len(words) >= 2 and last in _STREET_TYPES:
            # "Elm Street" without a house number: a street, a place, not a person.
            add("place", f"{_norm(' '.join(words[:-1]))} {_STREET_TYPES[last]}", m.span())
            continue
        value = _norm(" ".join(words))
        add("name" if len(words) >= 2 else "place", value, m.span())
        if len(words) >= 3 and _sentence_start(text, m.start()):
            # "Meet Alice Smith": the opening word may be a verb, not a first name.
            add("name", _norm(" ".join(words[1:])), m.span())
    return found


def _sentence_start(text: str, pos: int) -> bool:
    before = text[:pos].rstrip()
    return not before or before[-1] in ".!?:;\"'(\u201c"


def value_digests(statement: str, key: bytes, *, limit: int = MAX_VALUES) -> dict[str, str]:
    """``{digest: kind}``: HMAC-SHA256 with the tombstone key of each identifying value (R8)."""
    if not key:
        raise ValueError("value digests must be keyed: an unkeyed hash of a phone number is reversible")
    values = identifying_values(statement)
    # Strongest first, so the cut keeps what identifies.
    ordered = sorted(values.items(), key=lambda kv: (-KIND_WEIGHTS[kv[1]], kv[0]))[:limit]
    return {hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest(): kind for value, kind in ordered}


def shared_weight(new: Mapping[str, str], tombstoned: Iterable[str]) -> tuple[float, tuple[str, ...]]:
    """How identifying the values a statement shares with one tombstone are, and their kinds."""
    shared = [new[d] for d in set(tombstoned) if d in new]
    return sum(KIND_WEIGHTS[k] for k in shared), tuple(sorted(shared))


def blocks(new: Mapping[str, str], tombstoned: Iterable[str]) -> tuple[str, ...] | None:
    """The kinds of value that make a statement a rewording of a withdrawn one, or None."""
    weight, kinds = shared_weight(new, tombstoned)
    return kinds if weight >= BLOCK_WEIGHT else None


def describe(kinds: Iterable[str]) -> str:
    """ "street address and place", for a reviewer; never the values themselves."""
    labels = list(dict.fromkeys(KIND_LABELS[k] for k in kinds))
    if len(labels) <= 1:
        return "".join(labels)
    return ", ".join(labels[:-1]) + " and " + labels[-1]
