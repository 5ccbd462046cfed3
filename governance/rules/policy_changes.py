"""What a policy change changes, and the project's per-source authority caps.

Pure functions over ``PolicySettings`` and plain mappings: the console's
draft-versus-active diff, each version's changes against its predecessor,
and the validation of a project's source caps (R4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governance.rules.guard import DEFAULT_SOURCE_CAPS
from governance.rules.policy import PolicySettings
from governance.rules.supersession import effective_caps


@dataclass(frozen=True)
class FieldChange:
    name: str
    before: Any
    after: Any


def diff_settings(before: PolicySettings | None, after: PolicySettings) -> list[FieldChange]:
    """The fields whose values differ, in the policy JSON's field order.

    ``before=None`` (a first version) lists nothing: there is no predecessor
    to differ from. Kind lists compare as sets, since their order carries no
    meaning for retrieval.
    """
    if before is None:
        return []
    old, new = before.to_dict(), after.to_dict()
    changes = []
    for name in PolicySettings.field_names():
        a, b = old[name], new[name]
        same = set(a) == set(b) if isinstance(a, list) and isinstance(b, list) else a == b
        if not same:
            changes.append(FieldChange(name, a, b))
    return changes


def validate_source_caps(raw: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """A project's caps: every known source type, each a whole authority from 1 to 5.

    Returns the caps to store (only the source types that differ from the
    design's defaults, so a later change of a default still reaches projects
    that never tuned that source) and per-source error messages.
    """
    errors: dict[str, list[str]] = {}
    caps: dict[str, int] = {}
    for name in raw:
        if name not in DEFAULT_SOURCE_CAPS:
            errors.setdefault(name, []).append(f"Unknown source type '{name}'.")
    for name, default in DEFAULT_SOURCE_CAPS.items():
        value = raw.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            errors.setdefault(name, []).append("Authority runs from 1 to 5.")
            continue
        if value != default:
            caps[name] = value
    return ({}, errors) if errors else (caps, {})


# --- changes that let more become memory without a reviewer (least authority) -----------


def widening_policy_changes(before: PolicySettings, after: PolicySettings) -> list[str]:
    """What in ``after`` lets more become memory, or reach a context, without a person, in plain words.

    Lowering the auto-approve floor lets weaker sources become active with no
    reviewer; turning identity verification off lets principal memory reach
    an unverified requester. Such changes need a project administrator.
    """
    widening = []
    if after.auto_approve_min_authority < before.auto_approve_min_authority:
        widening.append(
            f"Writes become memory without review from authority {after.auto_approve_min_authority} "
            f"(was {before.auto_approve_min_authority})."
        )
    if before.require_identity_verification and not after.require_identity_verification:
        widening.append("Memory about a person is given out without verifying who is asking.")
    return widening


def widening_cap_changes(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """Source caps raised above what is in force (stored caps over the defaults), in plain words."""
    old, new = effective_caps(before), effective_caps(after)
    return [
        f"{name.replace('_', ' ').capitalize()} may carry authority {new[name]} (was {old[name]})."
        for name in DEFAULT_SOURCE_CAPS
        if new[name] > old[name]
    ]
