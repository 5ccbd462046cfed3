"""Who may claim which source, and who may replace whom (R4, R6, R7). Pure: no ORM.

Three questions every write asks, answered here once:

- Which source types may this agent claim at all? ``reviewer`` provenance
  comes only from a person in the console or governance API; ``config`` only
  from agents an admin marks as configuration sources; the rest is the
  agent's configured list, or every other type when none is configured.
- What is each source's maximum authority in this project? The documented
  defaults (docs/rules.md, R4), overridden per project (``effective_caps``).
- May a new value replace the active fact for its key without a person?
  Current configuration replaces project facts (R7); direct evidence replaces
  a fact of no higher authority; indirect sources (a model's inference, a
  summary) never replace direct evidence on their own (R6).

Messages here are read by people (reviewers, agent developers): plain words,
no rule numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from governance.rules.guard import DEFAULT_SOURCE_CAPS, DIRECT_EVIDENCE

SOURCE_TYPES: tuple[str, ...] = tuple(DEFAULT_SOURCE_CAPS)
PERSON_ONLY_SOURCES = frozenset({"reviewer"})
CONFIG_SOURCE = "config"
# Sources that never replace direct evidence without a reviewer (R6).
INDIRECT_SOURCES = frozenset({"model_inference", "summarizer"})

_SOURCE_LABELS = {
    "config": "configuration",
    "documentation": "documentation",
    "reviewer": "a reviewer",
    "user_statement": "the person's own words",
    "support_ticket": "a support ticket",
    "tool_output": "a tool's output",
    "chat_message": "a chat message",
    "model_inference": "a model's inference",
    "summarizer": "a conversation summary",
    "web_page": "a web page",
}


def source_label(source_type: str) -> str:
    """How a person reads a source type: ``model_inference`` -> "a model's inference"."""
    return _SOURCE_LABELS.get(source_type, source_type.replace("_", " "))


def claimable_sources(configured: Iterable[str], *, is_config_source: bool) -> tuple[str, ...]:
    """The source types an agent key may put on a write, in the documented order (docs/rules.md, R4).

    An empty ``configured`` list means "every type an agent may claim". A
    person-only type never becomes claimable, whatever is configured, and
    ``config`` needs the agent to be marked as a configuration source.
    """
    wanted = set(configured) or set(SOURCE_TYPES)
    allowed = wanted - PERSON_ONLY_SOURCES
    if not is_config_source:
        allowed.discard(CONFIG_SOURCE)
    return tuple(source for source in SOURCE_TYPES if source in allowed)


def effective_caps(overrides: Mapping[str, int] | None) -> dict[str, int]:
    """Each source's maximum authority in a project: the defaults, then its overrides (R4)."""
    caps = dict(DEFAULT_SOURCE_CAPS)
    for source, cap in (overrides or {}).items():
        if source in caps and isinstance(cap, int) and 1 <= cap <= 5:
            caps[source] = cap
    return caps


@dataclass(frozen=True)
class Incumbent:
    """The active fact a write would replace or repeat, as far as these rules care."""

    fact_id: int
    statement: str
    source_type: str
    authority: int
    is_project_fact: bool
    source_ref: str = ""
    observed_at: datetime | None = None


def is_independent_evidence(
    source_type: str, source_ref: str, authority: int, *, derived: bool, fact: Incumbent
) -> bool:
    """Whether a repeat of ``fact`` is new evidence for it (R9), rather than an echo.

    Only evidence independent of the fact and of memory may refresh it: another
    source (type or reference), not derived from a retrieval, at or above the
    fact's authority, or a reviewer. Anything else (a web page or a model
    repeating what memory already said) is a sighting that changes neither
    freshness nor confidence, so an echo cannot make a stale fact look fresh.
    """
    if derived:
        return False
    if source_type in PERSON_ONLY_SOURCES:
        return True
    same_source = source_type == fact.source_type and source_ref == fact.source_ref
    return not same_source and authority >= fact.authority


def arrives_late(observed_at: datetime, current: Incumbent) -> bool:
    """An observation older than the active fact's cannot replace it: it goes into history instead."""
    return current.observed_at is not None and observed_at < current.observed_at


def may_supersede(source_type: str, authority: int, old: Incumbent) -> bool:
    """Whether a write may replace ``old`` without a person deciding (R6, R7)."""
    if source_type == CONFIG_SOURCE and old.is_project_fact:
        return True  # R7: current configuration validates project facts.
    if source_type in DIRECT_EVIDENCE:
        return authority >= old.authority
    # Indirect sources never replace direct evidence on their own (R6).
    return old.source_type not in DIRECT_EVIDENCE and authority >= old.authority


def supersession_rule(source_type: str, old: Incumbent) -> str:
    """The rule that let a write replace ``old``, for the supersession's ``decided_by``."""
    return "R7" if source_type == CONFIG_SOURCE and old.is_project_fact else "R6"


QUOTE_LIMIT = 80


def quote(statement: str, limit: int = QUOTE_LIMIT) -> str:
    """``statement`` cut to ``limit`` characters with an ellipsis; withdrawal scrubs these forms too."""
    return statement if len(statement) <= limit else statement[: limit - 3] + "..."


def conflict_detail(source_type: str, authority: int, old: Incumbent) -> str:
    """Why a write that would replace ``old`` waits for a reviewer, in plain words."""
    if source_type in INDIRECT_SOURCES and old.source_type in DIRECT_EVIDENCE:
        why = f"{source_label(source_type)} never replaces {source_label(old.source_type)} without a reviewer"
    elif authority < old.authority:
        why = f"its authority ({authority}) is below the current fact's ({old.authority})"
    else:
        why = "a reviewer should confirm the change first"
    return f"Would replace fact {old.fact_id} (\u201c{quote(old.statement)}\u201d); it waits because {why}."


def supersede_reason(source_type: str, source_ref: str, key: str | None, old: Incumbent) -> str:
    """The reason stored on a supersession made without a person."""
    if supersession_rule(source_type, old) == "R7":
        return f"Current configuration ({source_ref}) replaces the project fact for '{key}'."
    return (
        f"Evidence from {source_label(source_type)} ({source_ref}) gives a different value for '{key}' "
        f"with authority at least the old fact's ({old.authority})."
    )
