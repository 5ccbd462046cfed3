"""Agent-supplied identifiers that reach a context: what shape they may take (R3, R5, R10). Pure.

A source reference is rendered inside every item's provenance tag
(``[SOURCE: ref | ...]``), and a summary's reference is built from the
session id and event ids the agent sent. They are attacker-controlled text
like any statement, so they are kept to opaque identifiers: bounded length,
no line breaks or invisible characters, none of the characters that delimit a
tag or markup. The write guard also reads the reference for instructions and
links, and rendering neutralises anything in a statement that looks like a
provenance tag.
"""

from __future__ import annotations

import re
import unicodedata

REF_MAX_CHARS = 200
IDENTIFIER_MAX_CHARS = 200

# Delimiters of the provenance tag and of markup: a ref holding them could
# close the tag early or open an element.
_REF_FORBIDDEN = frozenset("[]|<>{}`")
# Session and event ids: ASCII letters and digits plus a few separators, so a
# summary's reference stays an identifier whatever the agent sends.
_IDENTIFIER = re.compile(r"[A-Za-z0-9._:@#/+=~-](?:[A-Za-z0-9._:@#/+=~ -]*[A-Za-z0-9._:@#/+=~-])?")


def ref_problem(ref: str) -> str | None:
    """Why ``ref`` cannot be a source reference, in plain words, or None when it can."""
    if not ref.strip():
        return "Give a source reference (for example chat:1234 or a document URL)."
    if len(ref) > REF_MAX_CHARS:
        return f"A source reference has at most {REF_MAX_CHARS} characters."
    for ch in ref:
        if ch in _REF_FORBIDDEN:
            return f"A source reference cannot contain the character {ch!r}."
        # Cc: control characters and line breaks; Cf: zero-width and bidi controls.
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            return "A source reference cannot contain line breaks or invisible characters."
    return None


def identifier_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a session or event id, in plain words, or None when it can."""
    if not value:
        return f"Give the {what}."
    if len(value) > IDENTIFIER_MAX_CHARS:
        return f"The {what} has at most {IDENTIFIER_MAX_CHARS} characters."
    if not _IDENTIFIER.fullmatch(value):
        return (
            f"The {what} may use ASCII letters, digits, spaces and . _ : @ # / + = ~ - only, "
            "and cannot start or end with a space."
        )
    return None


def summary_ref(session_id: str, first_event: str, last_event: str, *, session_pk: int) -> str:
    """The source reference of a session's summary, from validated ids and within the length limit.

    The event range is kept on the summary fact too, so when the full form is
    too long the reference names the session alone, or only its number.
    """
    for ref in (f"session:{session_id}#{first_event}..{last_event}", f"session:{session_id}"):
        if len(ref) <= REF_MAX_CHARS:
            return ref
    return f"session:#{session_pk}"
