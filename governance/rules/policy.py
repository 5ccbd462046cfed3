"""An agent's retrieval and write policy as plain data, with its validation.

The field names are the governance API's policy JSON (docs/api.md); the defaults
are the design's defaults for a new agent. No ORM here: the policy versions in
the database store ``PolicySettings.to_dict()`` and rebuild it with
``PolicySettings.from_dict()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from governance.rules.relevance import SHIPPED_MODEL_FLOOR

FACT_KINDS: tuple[str, ...] = (
    "preference",
    "profile",
    "project_fact",
    "incident",
    "tool_instruction",
    "episodic",
    "summary",
    "slot",
)

ENCODINGS: tuple[str, ...] = ("cl100k_base", "o200k_base")

# Context windows of the models that use each encoding; a budget beyond the
# window could never be injected whole.
ENCODING_CONTEXT_TOKENS: dict[str, int] = {"cl100k_base": 128_000, "o200k_base": 128_000}

HELP: dict[str, str] = {
    "token_budget": "Most tokens the injected memory block may use.",
    "encoding": "Tokenizer used to count the budget; match the agent's model.",
    "recent_days": "Facts verified within this many days are injected plainly.",
    "confirm_days": "Facts older than the recent period but within this many days are injected "
    "with re-confirm phrasing; older ones are excluded as stale.",
    "session_resume_days": "A principal seen within this many days resumes where they left off.",
    "session_confirm_days": "Seen within this many days: confirm identity and memory first; "
    "beyond it the principal is treated as new.",
    "min_authority": "Facts below this authority (1-5) are never injected.",
    "allowed_kinds": "Kinds of fact this agent may receive.",
    "per_round_kinds": "Kinds retrieved again every round by similarity to the query; "
    "the others are static memory injected once per session.",
    "decay_half_life_days": "Freshness score halves every this many days since verification.",
    "weight_relevance": "Ranking weight of similarity to the query.",
    "weight_freshness": "Ranking weight of freshness (exponential decay).",
    "weight_confidence": "Ranking weight of authority and confidence state.",
    "min_relevance": "Per-round facts less similar than this to the query are excluded.",
    "max_items": "Most items injected in one block.",
    "require_identity_verification": "Inject no principal memory unless the caller asserts "
    "the person's identity was verified.",
    "auto_approve_min_authority": "Writes at or above this authority with no guard findings "
    "become active without review.",
}


@dataclass(frozen=True)
class PolicySettings:
    token_budget: int = 600
    encoding: str = "o200k_base"
    recent_days: int = 7
    confirm_days: int = 30
    session_resume_days: int = 14
    session_confirm_days: int = 90
    min_authority: int = 3
    allowed_kinds: tuple[str, ...] = FACT_KINDS
    per_round_kinds: tuple[str, ...] = ("episodic",)
    decay_half_life_days: float = 30.0
    weight_relevance: float = 0.6
    weight_freshness: float = 0.2
    weight_confidence: float = 0.2
    # Chosen on the labelled relevance set for the shipped embedder (docs/relevance.md).
    min_relevance: float = SHIPPED_MODEL_FLOOR
    max_items: int = 20
    require_identity_verification: bool = True
    auto_approve_min_authority: int = 4
    # Not part of the policy JSON's required fields, but carried with it.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name != "extra"]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("extra")
        data["allowed_kinds"] = list(self.allowed_kinds)
        data["per_round_kinds"] = list(self.per_round_kinds)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicySettings:
        """Rebuild from stored, already validated data (unknown keys ignored)."""
        values = {name: data[name] for name in cls.field_names() if name in data}
        for name in ("allowed_kinds", "per_round_kinds"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)

    def is_per_round(self, kind: str) -> bool:
        return kind in self.per_round_kinds


_INT_FIELDS = {
    "token_budget",
    "recent_days",
    "confirm_days",
    "session_resume_days",
    "session_confirm_days",
    "min_authority",
    "max_items",
    "auto_approve_min_authority",
}
_FLOAT_FIELDS = {
    "decay_half_life_days",
    "weight_relevance",
    "weight_freshness",
    "weight_confidence",
    "min_relevance",
}

# Every numeric field's smallest and largest value (docs/operations.md,
# "Limits"). A value that passes here is used in arithmetic and in SQL on
# every retrieval, so an unbounded one (max_items 4e18 overflowed the
# candidate query's LIMIT) would break every later request, not this one.
# Ten years is longer than any freshness or session window a product needs;
# token_budget is also held to the encoding's context below.
MAX_DAYS = 3650
BOUNDS: dict[str, tuple[float, float]] = {
    "token_budget": (1, max(ENCODING_CONTEXT_TOKENS.values())),
    "recent_days": (0, MAX_DAYS - 1),
    "confirm_days": (1, MAX_DAYS),
    "session_resume_days": (0, MAX_DAYS - 1),
    "session_confirm_days": (1, MAX_DAYS),
    "min_authority": (1, 5),
    "auto_approve_min_authority": (1, 5),
    "max_items": (1, 200),
    "decay_half_life_days": (0.1, MAX_DAYS),
    "weight_relevance": (0, 100),
    "weight_freshness": (0, 100),
    "weight_confidence": (0, 100),
    "min_relevance": (0, 1),
}


def merge_and_validate(
    base: PolicySettings, changes: Mapping[str, Any]
) -> tuple[PolicySettings | None, dict[str, list[str]]]:
    """Apply ``changes`` (any subset of the fields) to ``base``.

    Returns the new settings and no errors, or ``None`` and per-field messages
    written for the person who typed the value.
    """
    errors: dict[str, list[str]] = {}

    def err(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    known = set(PolicySettings.field_names())
    for name in changes:
        if name not in known:
            err(name, f"Unknown policy field '{name}'.")

    values: dict[str, Any] = base.to_dict()
    for name in known & set(changes):
        raw = changes[name]
        if name in _INT_FIELDS:
            if isinstance(raw, bool) or not _is_integral(raw):
                err(name, "Must be a whole number.")
                continue
            values[name] = int(raw)
        elif name in _FLOAT_FIELDS:
            if isinstance(raw, bool) or not _is_number(raw):
                err(name, "Must be a number.")
                continue
            values[name] = float(raw)
        elif name == "require_identity_verification":
            if not isinstance(raw, bool):
                err(name, "Must be true or false.")
                continue
            values[name] = raw
        elif name == "encoding":
            if raw not in ENCODINGS:
                err(name, f"Must be one of: {', '.join(ENCODINGS)}.")
                continue
            values[name] = raw
        elif name in ("allowed_kinds", "per_round_kinds"):
            if not isinstance(raw, list | tuple) or not all(isinstance(k, str) for k in raw):
                err(name, "Must be a list of fact kinds.")
                continue
            unknown = [k for k in raw if k not in FACT_KINDS]
            if unknown:
                err(name, f"Unknown kind(s): {', '.join(unknown)}. Known: {', '.join(FACT_KINDS)}.")
                continue
            values[name] = list(dict.fromkeys(raw))

    if not errors:
        _check_relations(values, err)
        # Every field, not only the changed ones: a version stored before the
        # bounds existed must be brought within them before it is published.
        # A field the relations already refused keeps that, more specific, message.
        for name in BOUNDS:
            if name not in errors:
                _within_bounds(name, values[name], err)
    if errors:
        return None, errors
    return PolicySettings.from_dict(values), {}


def _check_relations(values: dict[str, Any], err: Any) -> None:
    context = ENCODING_CONTEXT_TOKENS[values["encoding"]]
    if not 1 <= values["token_budget"] <= context:
        err("token_budget", f"Must be between 1 and {context:,}, the context of {values['encoding']} models.")
    if values["recent_days"] < 0:
        err("recent_days", "Must be zero or more days.")
    if values["confirm_days"] <= values["recent_days"]:
        err(
            "confirm_days",
            "Must be greater than “Recent for (days)”, or no fact could be in the re-confirm tier.",
        )
    if values["session_resume_days"] < 0:
        err("session_resume_days", "Must be zero or more days.")
    if values["session_confirm_days"] <= values["session_resume_days"]:
        err("session_confirm_days", "Must be greater than session_resume_days.")
    for name in ("min_authority", "auto_approve_min_authority"):
        if not 1 <= values[name] <= 5:
            err(name, "Authority runs from 1 to 5.")
    if values["decay_half_life_days"] <= 0:
        err("decay_half_life_days", "Must be more than zero days.")
    weights = ("weight_relevance", "weight_freshness", "weight_confidence")
    for name in weights:
        if values[name] < 0:
            err(name, "Weights cannot be negative.")
    if all(values[name] == 0 for name in weights):
        err("weight_relevance", "At least one ranking weight must be above zero.")
    if not 0 <= values["min_relevance"] <= 1:
        err("min_relevance", "Relevance is a similarity between 0 and 1.")
    if values["max_items"] < 1:
        err("max_items", "Must allow at least one item.")
    if not values["allowed_kinds"]:
        err("allowed_kinds", "Allow at least one kind.")
    outside = [k for k in values["per_round_kinds"] if k not in values["allowed_kinds"]]
    if outside:
        err("per_round_kinds", f"Not allowed for this agent: {', '.join(outside)}.")


def _within_bounds(name: str, value: float, err: Any) -> None:
    low, high = BOUNDS[name]
    if not low <= value <= high:
        err(name, f"Must be between {_plain(low)} and {_plain(high)}.")


def _plain(bound: float) -> str:
    return f"{bound:,}" if float(bound).is_integer() and bound >= 1000 else f"{bound:g}"


def _is_integral(value: Any) -> bool:
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()  # False for infinity and NaN


def _is_number(value: Any) -> bool:
    # Infinity and NaN (JSON 1e400 parses as infinity) are refused here, with
    # a field error, rather than stored and failing later.
    if isinstance(value, int):
        return True  # math.isfinite would overflow on a very large integer
    return isinstance(value, float) and math.isfinite(value)
