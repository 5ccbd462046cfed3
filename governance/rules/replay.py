"""What-if replay (issue 5): pure pieces of re-deciding past retrievals under a draft policy.

The service (``governance.services.replay``) loads events, their recorded
candidates and the facts' history; everything that decides what a replay
reports lives here, over plain data:

- ``snapshot_at`` picks a fact's state as it stood at an event's time from
  its history rows, and ``to_candidate`` turns it into a retrieval
  ``Candidate`` (a withdrawn fact's erased statement becomes a placeholder,
  R8, so the replay still runs and says it was approximate);
- ``static_block_of`` and ``resume_hint_of`` read back what a recorded
  context held (R10, R12);
- ``compare_event`` compares the recorded decisions with the replayed ones;
- ``ReplayTally`` accumulates comparisons into the JSON a job stores:
  changed events, items added and dropped by reason, token distributions
  and exclusion reasons before and after.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from governance.rules import rendering
from governance.rules.retrieval import Candidate, RetrievalPlan

# The kind of the background job that runs a replay (models.Job.kind).
JOB_KIND = "policy_replay"

# Reasons only a replay gives, beside R14's vocabulary:
# - not_per_round: a later round (R12) of a kind the draft makes session-start
#   memory; it would have been in the cached block, which the round cannot change;
# - not_recorded: the fact did not exist yet at the event's time.
NOT_PER_ROUND = "not_per_round"
NOT_RECORDED = "not_recorded"
REPLAY_REASONS: tuple[str, ...] = (NOT_PER_ROUND, NOT_RECORDED)

HISTOGRAM_BINS = 10
CHANGED_ROWS_LIMIT = 1000


@dataclass(frozen=True)
class FactSnapshot:
    """A fact as one history row recorded it (a candidate with no relevance yet), and when."""

    at: datetime
    recorded_at: datetime
    fact: Candidate


def snapshot_at(history: Sequence[FactSnapshot], at: datetime) -> FactSnapshot | None:
    """The last row written at or before ``at``; None if the fact was not recorded yet.

    ``history`` is in write order. A row stamped exactly ``at`` counts: the
    retrieval read committed rows, and a row cannot commit after its own
    timestamp was already in the past for a later reader.
    """
    times = [row.at for row in history]
    index = bisect_right(times, at)
    if index == 0:
        return None
    row = history[index - 1]
    return None if row.recorded_at > at else row


def erased_statement(fact_id: int) -> str:
    """Stand-in for a statement erased by withdrawal (R8): unique, so no two compare as duplicates."""
    return f"[withdrawn fact #{fact_id}]"


def to_candidate(snapshot: FactSnapshot, relevance: float | None) -> Candidate:
    fact = snapshot.fact
    return replace(fact, statement=fact.statement or erased_statement(fact.fact_id), relevance=relevance)


def static_block_of(context: str) -> str:
    """The session-start part of a recorded context (R12).

    Rendering joins the blocks with one blank line and no statement keeps a
    line break, so the first blank line is the join. A context that holds
    only a round block has no static part.
    """
    if context.startswith(rendering.ROUND_HEADING):
        return ""
    static, _, _ = context.partition(rendering.BLOCK_SEPARATOR)
    return static


# The tag rendering.provenance_tag puts at the end of the hint line; the ref
# cannot contain "|" or "]", so the last match is the real tag.
_HINT_TAG = re.compile(
    r" \[SOURCE: (?P<ref>[^\]|]*) \| AUTHORITY: (?P<authority>\d+) \| AGE: (?P<age>\d+) days\]$"
)


def resume_hint_of(context: str) -> rendering.ResumeHint | None:
    """The resume hint a recorded context carried (R9 resume mode), with its tag, or None.

    A context recorded before hints were tagged gives a hint without a source,
    which renders as it did then, so replaying old events changes nothing.
    """
    lines = static_block_of(context).split("\n")
    if not (
        len(lines) >= 3
        and lines[1] == rendering.RESUME_LINE
        and lines[2].startswith(rendering.RESUME_HINT_PREFIX)
    ):
        return None
    line = lines[2][len(rendering.RESUME_HINT_PREFIX) :]
    tag = _HINT_TAG.search(line)
    if tag is None:
        return rendering.ResumeHint(line) if line else None
    return rendering.ResumeHint(
        line[: tag.start()],
        source_ref=tag.group("ref"),
        authority=int(tag.group("authority")),
        age_days=int(tag.group("age")),
    )


@dataclass(frozen=True)
class Outcome:
    """One candidate's decision, recorded or replayed."""

    fact_id: int
    decision: str  # "selected" | "excluded"
    reason: str | None


@dataclass(frozen=True)
class ItemChange:
    """A fact that one side selects and the other does not.

    ``reason`` is the other side's exclusion reason: for an added item, why
    the recorded retrieval left it out; for a dropped item, why the draft does.
    """

    fact_id: int
    kind: str
    reason: str | None


@dataclass(frozen=True)
class EventComparison:
    event_id: int
    added: tuple[ItemChange, ...]
    dropped: tuple[ItemChange, ...]
    tokens_before: int
    tokens_after: int
    reasons_before: Mapping[str, int]
    reasons_after: Mapping[str, int]
    approximate: bool = False  # an erased statement or a missing history row was involved

    @property
    def changed(self) -> bool:
        """A different set of items would be injected (the issue's "changed event")."""
        return bool(self.added or self.dropped)


def compare_event(
    event_id: int,
    before: Iterable[Outcome],
    after: Iterable[Outcome],
    kinds: Mapping[int, str],
    *,
    tokens_before: int,
    tokens_after: int,
    inherited_before: Iterable[Outcome] = (),
    inherited_after: Iterable[Outcome] = (),
    approximate: bool = False,
) -> EventComparison:
    """Selected sets before and after, with each difference's reason from the other side.

    ``inherited_*`` are the decisions a later round re-injects from its
    session's cached block (R12): they count toward what the event injects,
    but their exclusions were counted at the round that made them, so they
    are left out of the reason counts.
    """
    before, after = list(before), list(after)
    old = {o.fact_id: o for o in [*inherited_before, *before]}
    new = {o.fact_id: o for o in [*inherited_after, *after]}
    old_selected = {fid for fid, o in old.items() if o.decision == "selected"}
    new_selected = {fid for fid, o in new.items() if o.decision == "selected"}

    def reason(side: Mapping[int, Outcome], fact_id: int) -> str | None:
        outcome = side.get(fact_id)
        # A fact absent from one side was never a candidate there.
        return outcome.reason if outcome is not None else NOT_RECORDED

    added = tuple(
        ItemChange(fid, kinds.get(fid, ""), reason(old, fid)) for fid in sorted(new_selected - old_selected)
    )
    dropped = tuple(
        ItemChange(fid, kinds.get(fid, ""), reason(new, fid)) for fid in sorted(old_selected - new_selected)
    )
    return EventComparison(
        event_id=event_id,
        added=added,
        dropped=dropped,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        reasons_before=_reason_counts(before),
        reasons_after=_reason_counts(after),
        approximate=approximate,
    )


def _reason_counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    return dict(Counter(o.reason for o in outcomes if o.decision == "excluded" and o.reason))


# --- Distributions ----------------------------------------------------------


def percentile(sorted_values: Sequence[int], fraction: float) -> int:
    """Nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def distribution(values: Sequence[int]) -> dict[str, float | int]:
    ordered = sorted(values)
    count = len(ordered)
    return {
        "count": count,
        "total": sum(ordered),
        "mean": round(sum(ordered) / count, 1) if count else 0,
        "min": ordered[0] if ordered else 0,
        "p50": percentile(ordered, 0.5),
        "p90": percentile(ordered, 0.9),
        "max": ordered[-1] if ordered else 0,
    }


def histogram(
    before: Sequence[int], after: Sequence[int], bins: int = HISTOGRAM_BINS
) -> dict[str, list[int]]:
    """Counts of both series over the same bins, so the two can be drawn side by side.

    ``edges`` has ``bins + 1`` whole-token bounds from 0; bin ``i`` holds
    values from ``edges[i]`` up to but excluding ``edges[i + 1]``, and the
    last bin includes its upper edge.
    """
    top = max([*before, *after, 1])
    width = max(1, math.ceil(top / bins))
    edges = [i * width for i in range(bins + 1)]

    def counts(values: Sequence[int]) -> list[int]:
        out = [0] * bins
        for value in values:
            out[min(bins - 1, max(0, value) // width)] += 1
        return out

    return {"edges": edges, "before": counts(before), "after": counts(after)}


# --- The job's result ------------------------------------------------------


@dataclass
class ReplayTally:
    """Accumulates event comparisons into the result a replay job stores.

    ``changed_limit`` bounds the stored table of changed events (the counts
    stay exact): a 10,000-event replay must not make a multi-megabyte row.
    """

    changed_limit: int = CHANGED_ROWS_LIMIT
    events: int = 0
    changed_events: int = 0
    approximate_events: int = 0
    items_added: int = 0
    items_dropped: int = 0
    added_by_reason: Counter[str] = field(default_factory=Counter)
    dropped_by_reason: Counter[str] = field(default_factory=Counter)
    reasons_before: Counter[str] = field(default_factory=Counter)
    reasons_after: Counter[str] = field(default_factory=Counter)
    tokens_before: list[int] = field(default_factory=list)
    tokens_after: list[int] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)

    def add(self, comparison: EventComparison, info: Mapping[str, Any] | None = None) -> None:
        """Count one event; ``info`` (when, who, mode) goes into its row if it changed."""
        self.events += 1
        self.tokens_before.append(comparison.tokens_before)
        self.tokens_after.append(comparison.tokens_after)
        self.reasons_before.update(comparison.reasons_before)
        self.reasons_after.update(comparison.reasons_after)
        if comparison.approximate:
            self.approximate_events += 1
        if not comparison.changed:
            return
        self.changed_events += 1
        self.items_added += len(comparison.added)
        self.items_dropped += len(comparison.dropped)
        self.added_by_reason.update(c.reason or "selected" for c in comparison.added)
        self.dropped_by_reason.update(c.reason or "selected" for c in comparison.dropped)
        if len(self.changed) < self.changed_limit:
            self.changed.append(
                {
                    "event_id": comparison.event_id,
                    **(info or {}),
                    "added": [_change_row(c) for c in comparison.added],
                    "dropped": [_change_row(c) for c in comparison.dropped],
                    "tokens_before": comparison.tokens_before,
                    "tokens_after": comparison.tokens_after,
                    "approximate": comparison.approximate,
                }
            )

    def result(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "changed_events": self.changed_events,
            "unchanged_events": self.events - self.changed_events,
            "approximate_events": self.approximate_events,
            "items_added": self.items_added,
            "items_dropped": self.items_dropped,
            "added_by_reason": dict(sorted(self.added_by_reason.items())),
            "dropped_by_reason": dict(sorted(self.dropped_by_reason.items())),
            "tokens": {
                "before": distribution(self.tokens_before),
                "after": distribution(self.tokens_after),
                "histogram": histogram(self.tokens_before, self.tokens_after),
            },
            "exclusions": {
                "before": dict(sorted(self.reasons_before.items())),
                "after": dict(sorted(self.reasons_after.items())),
            },
            "changed": list(self.changed),
            "changed_truncated": self.changed_events > len(self.changed),
        }


def _change_row(change: ItemChange) -> dict[str, Any]:
    return {"fact_id": change.fact_id, "kind": change.kind, "reason": change.reason}


# --- One retrieval re-ranked under two policies (the policy editor's preview) ----------


@dataclass(frozen=True)
class Placing:
    """Where one candidate stands under one policy."""

    rank: int | None  # 1 = best; None when a rule left it out before ranking (too old, not allowed…)
    injected: bool
    reason: str | None  # why it is left out, when it is
    score: float | None  # the weighted total; None when it was not ranked


@dataclass(frozen=True)
class RankedPair:
    fact_id: int
    statement: str
    kind: str
    published: Placing
    draft: Placing

    @property
    def moved(self) -> int:
        """Places up (positive) or down (negative) under the draft; 0 if either side left it out."""
        if self.published.rank is None or self.draft.rank is None:
            return 0
        return self.published.rank - self.draft.rank

    @property
    def places(self) -> int:
        return abs(self.moved)

    @property
    def changed(self) -> bool:
        """Injected under one policy and not the other."""
        return self.published.injected != self.draft.injected


def side_by_side(
    candidates: Sequence[Candidate], published: RetrievalPlan, draft: RetrievalPlan
) -> list[RankedPair]:
    """Each candidate placed under both plans, in the draft's order (ranked first, then the rest).

    The plans come from ``retrieval.plan_retrieval`` over the same candidates: this only reads
    back the order and decisions the retrieval rules made.
    """

    def placings(plan: RetrievalPlan) -> dict[int, Placing]:
        positions = {fact_id: position for position, fact_id in enumerate(plan.ranked, start=1)}
        return {
            d.fact_id: Placing(
                rank=positions.get(d.fact_id),
                injected=d.decision == "selected",
                reason=d.reason,
                score=d.scores.get("total") if d.fact_id in positions else None,
            )
            for d in plan.decisions
        }

    before, after = placings(published), placings(draft)
    rows = [
        RankedPair(c.fact_id, c.statement, c.kind, before[c.fact_id], after[c.fact_id]) for c in candidates
    ]
    unranked = len(rows) + 1
    return sorted(rows, key=lambda r: (r.draft.rank or unranked, r.published.rank or unranked, r.fact_id))
