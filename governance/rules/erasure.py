"""Forgetting a person: what an erasure counts, how it redacts stored text, and its receipt.

Pure functions over plain values (no ORM). The service
(governance/services/erasure.py) reads and changes rows; the rules here decide
what a pseudonym is, which lines of a stored context are the person's, how
counts add up, and what a receipt states, so a receipt can be rebuilt from its
audit entry and compared field by field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from governance.rules.rendering import ITEM_PREFIX, PRINCIPAL_HEADING, RESUME_HINT_PREFIX
from governance.rules.text import keyed_digest

ERASED = "[erased]"
PSEUDONYM_PREFIX = "erased-"
RECEIPT_ACTION = "principal.erased"
START_ACTION = "principal.erasure_started"
JOB_KIND = "erasure"

# Every kind a principal's fact can have (a principal never holds project facts).
FACT_KINDS: tuple[str, ...] = (
    "preference",
    "profile",
    "incident",
    "tool_instruction",
    "episodic",
    "summary",
    "slot",
    "project_fact",
)
# What else an erasure touches, in the order receipts and dry runs list them.
OTHER_KINDS: tuple[str, ...] = (
    "writes",
    "review_decisions",
    "retrieval_events",
    "session_blocks",
    "resume_hints",
)

# Plain words for people (console, receipts); the keys stay in code and JSON.
LABELS: Mapping[str, str] = {
    "preference": "Preferences",
    "profile": "Profile facts",
    "incident": "Incident notes",
    "tool_instruction": "Tool instructions",
    "episodic": "Conversation snippets",
    "summary": "Session summaries",
    "slot": "Working memory of a session",
    "project_fact": "Project facts",
    "writes": "Proposed memory writes (their text, check findings and stored replies)",
    "review_decisions": "Review decisions (reviewers' notes and edits)",
    "retrieval_events": "Stored retrieval records (the person's lines and the question asked)",
    "session_blocks": "Cached session-start blocks",
    "resume_hints": "Resume hints",
}


def pseudonym(external_id: str, key: bytes) -> str:
    """The keyed pseudonym that replaces a forgotten person's external id.

    Deterministic, so a second request for the same id finds the same row
    (the erasure is idempotent) and counts per person stay whole; keyed, so
    nobody without the key can test a guessed id against it.
    """
    return PSEUDONYM_PREFIX + keyed_digest(external_id, key)[:32]


_PSEUDONYM = re.compile(rf"{PSEUDONYM_PREFIX}[0-9a-f]{{32}}(-[0-9]+)?")


def is_pseudonym(external_id: str) -> bool:
    """True for a forgotten person's id: the keyed stem, with the row id when the stem was taken."""
    return _PSEUDONYM.fullmatch(external_id) is not None


def empty_counts() -> dict[str, Any]:
    return {"facts": dict.fromkeys(FACT_KINDS, 0), **dict.fromkeys(OTHER_KINDS, 0)}


def add_counts(total: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """``total`` plus ``more``: both in ``empty_counts`` shape (missing keys count as 0)."""
    facts = {
        kind: int(total.get("facts", {}).get(kind, 0)) + int(more.get("facts", {}).get(kind, 0))
        for kind in FACT_KINDS
    }
    return {"facts": facts, **{k: int(total.get(k, 0)) + int(more.get(k, 0)) for k in OTHER_KINDS}}


def total_items(counts: Mapping[str, Any]) -> int:
    return sum(int(n) for n in counts.get("facts", {}).values()) + sum(
        int(counts.get(k, 0)) for k in OTHER_KINDS
    )


def labelled(counts: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """``(key, label, count)`` rows for people, facts by kind first (a person holds no project facts)."""
    rows = [(k, LABELS[k], int(counts.get("facts", {}).get(k, 0))) for k in FACT_KINDS if k != "project_fact"]
    return rows + [(k, LABELS[k], int(counts.get(k, 0))) for k in OTHER_KINDS]


def redact_lines(context: str, forms: Sequence[str]) -> str:
    """``context`` with every line that carries one of ``forms`` replaced by the erasure marker.

    Whole lines go, not only the quoted text: an item line also carries the
    statement's provenance tag, which is about the person too.
    """
    if not context or not forms:
        return context
    lines = context.split("\n")
    out = [_erased_line(line) if any(form in line for form in forms) else line for line in lines]
    return "\n".join(out)


def redact_person_section(context: str) -> str:
    """Every item under the "About the user" heading, and the resume hint line, erased.

    Everything in that section of a stored context is about the person the
    retrieval was for, whatever its statement was; project items stay.
    """
    if not context:
        return context
    out: list[str] = []
    in_person = False
    for line in context.split("\n"):
        if line == PRINCIPAL_HEADING:
            in_person = True
            out.append(line)
            continue
        if in_person and not line.startswith(ITEM_PREFIX):
            in_person = False
        if in_person or line.startswith(RESUME_HINT_PREFIX):
            out.append(_erased_line(line))
        else:
            out.append(line)
    return "\n".join(out)


def _erased_line(line: str) -> str:
    if line.startswith(ITEM_PREFIX):
        return ITEM_PREFIX + ERASED
    if line.startswith(RESUME_HINT_PREFIX):
        return RESUME_HINT_PREFIX + ERASED
    return ERASED


def scrub_identifier(text: str, external_id: str, replacement: str) -> str:
    """``text`` with the person's external id replaced where it stands as a whole token
    (not inside a longer id or word), so a short id does not rewrite unrelated text."""
    if not external_id or not text:
        return text
    return re.sub(rf"(?<![\w-]){re.escape(external_id)}(?![\w-])", lambda _: replacement, text)


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def receipt(
    *,
    project: str,
    sequence: int,
    entry_hash: str,
    actor: str,
    reason: str,
    recorded_at: datetime,
    data: Mapping[str, Any],
) -> dict[str, Any]:
    """The receipt document for one ``principal.erased`` audit entry.

    Everything in it is read from the entry (its fields and ``data``), so the
    same function rebuilds it from the chain when a receipt is checked. No
    erased content: counts, ids, the pseudonym and the chain position.
    """
    counts = data.get("counts", empty_counts())
    return {
        "document": "erasure receipt",
        "project": project,
        "principal": data.get("principal", ""),
        "job": data.get("job"),
        "requested_at": data.get("requested_at"),
        "erased_at": _timestamp(recorded_at),
        "requested_by": actor,
        "reason": reason,
        "counts": counts,
        "total": total_items(counts),
        "nothing_new": bool(data.get("nothing_new", False)),
        "tombstones": list(data.get("tombstones", [])),
        "retrieval_events_resealed": sorted(int(i) for i in data.get("retrieval_seals", {})),
        "audit": {"action": RECEIPT_ACTION, "sequence": sequence, "entry_hash": entry_hash},
    }


def receipt_differences(document: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[str]:
    """The top-level fields where ``document`` says something other than the chain (``recorded``)."""
    keys: Iterable[str] = sorted(set(document) | set(recorded))
    return [key for key in keys if document.get(key) != recorded.get(key)]
