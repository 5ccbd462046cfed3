"""Who may withdraw what, and which copies of a withdrawn statement a withdrawal erases (R8).

Pure functions over plain values. An agent withdraws on a person's request
(issue 19 item 1): only facts about the person it names, never project facts
or configuration, and never what still waits for, or was turned away by, a
reviewer. A withdrawal erases every copy of the statement for that principal,
except that an agent never erases the evidence of a blocked write: that is a
reviewer's decision.
"""

from __future__ import annotations

from dataclasses import dataclass

# Copies a reviewer must decide about before anyone erases them: the guard or
# a reviewer blocked the write, and its statement, findings and decision are
# the evidence.
EVIDENCE_STATUSES: frozenset[str] = frozenset({"quarantined", "rejected"})
# Statuses an agent may not withdraw directly: a person is deciding, or decided.
AWAITING_OR_REFUSED: frozenset[str] = frozenset({"pending_review", "quarantined", "rejected"})
CONFIG_SOURCE = "config"
AGENT_REASON_PREFIX = "On the person's request: "


@dataclass(frozen=True)
class Refusal:
    """Why an agent may not withdraw a fact, in words for the agent's developer."""

    code: str
    message: str


def agent_refusal(*, status: str, source_type: str, has_principal: bool) -> Refusal | None:
    """None when an agent may withdraw a fact in this state on its person's request."""
    if not has_principal:
        return Refusal(
            "project_fact",
            "This is a project fact, not a memory about one person, so an agent cannot withdraw it. "
            "A reviewer can withdraw it in the console.",
        )
    if source_type == CONFIG_SOURCE:
        return Refusal(
            "configuration",
            "This fact comes from configuration, so an agent cannot withdraw it. "
            "Change the configuration, or ask a reviewer to withdraw it in the console.",
        )
    if status in AWAITING_OR_REFUSED:
        wording = {
            "pending_review": "is waiting for a reviewer's decision",
            "quarantined": "was held back for a reviewer by the write checks",
            "rejected": "was rejected, and is kept as the record of that decision",
        }[status]
        return Refusal(
            "under_review",
            f"This memory {wording}; it is never given to an agent, and only a reviewer can remove it.",
        )
    return None


def keeps_copy(status: str, *, by_agent: bool) -> bool:
    """True when a withdrawal leaves this copy of the statement in place for a reviewer."""
    return by_agent and status in EVIDENCE_STATUSES


def agent_reason(reason: str) -> str:
    """The recorded reason of an agent's withdrawal: it acts on the person's request, and says so."""
    return f"{AGENT_REASON_PREFIX}{reason.strip()}"
