"""Retrieval steps 2, 4 and 5 (docs/architecture.md, "The flow", step 4) as pure functions.

The selector fetches candidates and the service writes the event; everything
that decides what an agent is told lives here, over plain data, so every rule
can be tested exhaustively without a database.

Order of work in ``plan_retrieval``:

1. Each candidate gets eligibility checks, first match wins, so the event
   carries exactly one reason per exclusion (R14).
2. Survivors are scored and ranked (total desc, then fact id, so equal
   scores never reorder between runs).
3. Walking in rank order: duplicates of a higher-ranked survivor, then
   unkeyed snippets contradicting a keyed fact (R18), drop out.
4. At most ``max_items`` are kept, then packed into the token budget in rank
   order; the first item that does not fit ends the packing (R11).
"""

from __future__ import annotations

import functools
import math
import operator
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from governance.rules import contradictions, rendering
from governance.rules.policy import PolicySettings
from governance.rules.tokens import count_context_tokens, count_tokens

REASONS: tuple[str, ...] = (
    "below_authority",
    "stale",
    "expired",
    "not_yet_valid",
    "superseded",
    "withdrawn",
    "not_active",
    "kind_not_allowed",
    "identity_unverified",
    "low_relevance",
    "duplicate",
    "conflict_lost",
    "over_budget",
)
MODES = rendering.MODES

# In-session working memory: always retrieved per round, whatever the policy
# says, and never dropped for low relevance (it is this session's state).
SLOT_KIND = "slot"

CONFIDENCE_FACTORS: dict[str, float] = {
    "verified": 1.0,
    "corroborated": 0.9,
    "unverified": 0.75,
    "disputed": 0.4,
}
DUPLICATE_COSINE = 0.95
MAX_AUTHORITY = 5

# R12 caches the session-start block for the whole session, so whatever it
# takes on round 1 is gone for every later round. Static memory may therefore
# use at most this share of the token budget and of max_items; the rest is
# kept for per-round kinds and slots, which arrive round by round.
ROUND_RESERVE_SHARE = 0.25

# Statuses that have their own exclusion reason; every other non-active status
# (pending_review, quarantined, rejected, out_of_scope) is ``not_active`` (R2).
_STATUS_REASONS = {"superseded": "superseded", "withdrawn": "withdrawn", "expired": "expired"}

_DAY = timedelta(days=1)


# Candidate and Decision are built once per candidate of every round (hundreds
# for a large principal's first round, thousands for the largest): plain slotted
# dataclasses, as a frozen one sets each field through object.__setattr__ and
# costs three to four times as much to make. Nothing changes one once made: the
# rules make new ones (``dataclasses.replace``).
@dataclass(slots=True)
class Candidate:
    fact_id: int
    kind: str
    key: str | None
    statement: str
    status: str
    is_project_fact: bool  # the fact's principal is null
    source_type: str
    source_ref: str
    authority: int
    confidence: str
    valid_from: datetime | None
    valid_to: datetime | None
    last_verified_at: datetime
    relevance: float | None = None  # cosine similarity to the query; None without a query
    embedding: tuple[float, ...] | None = None
    # What the fact's row keeps of its statement's claims (contradictions.stored_claims), if read.
    stored_claims: str | None = None

    @property
    def when(self) -> datetime:
        """The fact's last verification, as ``contradictions.Comparable`` names it."""
        return self.last_verified_at


# The fact columns a candidate is built from, besides the fact's id: read from the
# live row by the candidate query (selectors/retrievals.py), and from a history
# row by the policy replay (services/replay.py), so both rank the same things.
CANDIDATE_COLUMNS = (
    "kind",
    "key",
    "statement",
    "status",
    "principal_id",
    "source_type",
    "source_ref",
    "authority",
    "confidence",
    "valid_from",
    "valid_to",
    "last_verified_at",
)


def candidate_from_columns(
    fact_id: int, columns: Mapping[str, Any], relevance: float | None = None
) -> Candidate:
    """A candidate from a fact's ``CANDIDATE_COLUMNS`` (a row read as a mapping of them)."""
    return Candidate(
        fact_id=fact_id,
        kind=columns["kind"],
        key=columns["key"],
        statement=columns["statement"],
        status=columns["status"],
        is_project_fact=columns["principal_id"] is None,
        source_type=columns["source_type"],
        source_ref=columns["source_ref"],
        authority=columns["authority"],
        confidence=columns["confidence"],
        valid_from=columns["valid_from"],
        valid_to=columns["valid_to"],
        last_verified_at=columns["last_verified_at"],
        relevance=relevance,
    )


@dataclass(slots=True)
class Decision:
    fact_id: int
    decision: str  # "selected" | "excluded"
    reason: str | None  # one of REASONS when excluded
    tier: str | None  # set once the fact passed the staleness check
    age_days: int
    scores: dict[str, float]  # relevance, freshness, confidence, total
    tokens: int  # tokens of its rendered line; 0 if it was never rendered
    per_round: bool


@dataclass(frozen=True)
class SelectedItem:
    fact_id: int
    statement: str
    kind: str
    source_type: str
    source_ref: str
    authority: int
    age_days: int
    tier: str
    tokens: int
    per_round: bool
    is_project_fact: bool


@dataclass(frozen=True)
class RetrievalPlan:
    decisions: tuple[Decision, ...]  # one per candidate, in the candidates' order
    selected: tuple[SelectedItem, ...]  # rank order
    static_block: str
    round_block: str
    context: str
    tokens_used: int
    token_budget: int
    # Eligible candidates' fact ids, best first: the order the rules ranked them in, before
    # duplicates, conflicts and the budget took some out (the policy editor shows it).
    ranked: tuple[int, ...] = ()
    static_tokens: int = 0  # tokens of ``static_block`` alone (the session-start block's cached count)


def age_in_days(since: datetime, now: datetime) -> int:
    """Whole days from ``since`` to ``now``, floored; a future time counts as 0.

    A verification stamped slightly after ``now`` (clock skew between writer
    and reader) must not yield a negative age that would out-rank fresh facts.
    """
    return max(0, (now - since) // _DAY)


def session_mode(last_interaction: datetime | None, now: datetime, policy: PolicySettings) -> str:
    """``resume``, ``confirm`` or ``new`` from the principal's last interaction (R9)."""
    if last_interaction is None:
        return "new"
    days = age_in_days(last_interaction, now)
    if days <= policy.session_resume_days:
        return "resume"
    if days <= policy.session_confirm_days:
        return "confirm"
    return "new"


def is_per_round(kind: str, policy: PolicySettings) -> bool:
    return kind == SLOT_KIND or policy.is_per_round(kind)


def score(candidate: Candidate, age_days: int, policy: PolicySettings) -> dict[str, float]:
    """Ranking scores (step 5): relevance, freshness decay, confidence x authority."""
    relevance = candidate.relevance if candidate.relevance is not None else 0.0
    freshness = 0.5 ** (age_days / policy.decay_half_life_days)
    # An unknown confidence state ranks like ``disputed``: never above a known one.
    factor = CONFIDENCE_FACTORS.get(candidate.confidence, CONFIDENCE_FACTORS["disputed"])
    confidence = candidate.authority / MAX_AUTHORITY * factor
    total = (
        policy.weight_relevance * relevance
        + policy.weight_freshness * freshness
        + policy.weight_confidence * confidence
    )
    return {"relevance": relevance, "freshness": freshness, "confidence": confidence, "total": total}


def plan_retrieval(
    candidates: Sequence[Candidate],
    policy: PolicySettings,
    *,
    now: datetime,
    mode: str,
    identity_verified: bool,
    resume_hint: rendering.ResumeHint | str | None,
    cached_static_block: str | None,
    cached_static_facts: Sequence[Candidate] = (),
    rulings: contradictions.PairRulings = contradictions.NO_RULINGS,
) -> RetrievalPlan:
    """Decide, rank, pack and render one retrieval.

    Round 1 of a session passes ``cached_static_block=None`` and all
    candidates; the plan's ``static_block`` is what the caller caches. Later
    rounds (R12) pass that block back, only per-round candidates, and
    optionally ``cached_static_facts``: the static facts the cached block
    holds, consulted (never re-decided) so a per-round snippet that repeats or
    contradicts them is still a ``duplicate`` or ``conflict_lost``.

    The cached block is returned byte-identical and the round items get only
    the budget it leaves. If the header alone (or the cached block) exceeds
    the budget, nothing is injected: R11 is a hard limit, and an empty context
    is safer than a truncated one (R13). An empty cached block (round 1's
    header did not fit) likewise admits no round items, which would otherwise
    arrive without the priority statement (R10).
    """
    if mode not in MODES:
        raise ValueError(f"Unknown session mode {mode!r}; expected one of: {', '.join(MODES)}.")
    if cached_static_block is None and cached_static_facts:
        raise ValueError("cached_static_facts only make sense with a cached_static_block (R12).")
    if cached_static_block is not None:
        static_kinds = sorted({c.kind for c in candidates if not is_per_round(c.kind, policy)})
        if static_kinds:
            raise ValueError(
                f"Static kinds ({', '.join(static_kinds)}) are injected once per session (R12); "
                "do not pass them again with a cached static block."
            )

    # Whether a kind is per-round, once per kind rather than per candidate.
    per_round_kind = {kind: is_per_round(kind, policy) for kind in {c.kind for c in candidates}}
    ages = [age_in_days(c.last_verified_at, now) for c in candidates]
    scores = [score(c, age, policy) for c, age in zip(candidates, ages, strict=True)]
    reasons: list[str | None] = []
    tiers: list[str | None] = []
    for candidate, age in zip(candidates, ages, strict=True):
        reason, tier = eligibility(candidate, age, policy, now=now, mode=mode, verified=identity_verified)
        reasons.append(reason)
        tiers.append(tier)

    eligible = [i for i, reason in enumerate(reasons) if reason is None]
    ranked = sorted(eligible, key=lambda i: (-scores[i]["total"], candidates[i].fact_id))

    # Duplicates and R18 conflicts, in rank order: the higher-ranked fact wins.
    # Linear: each statement is normalised once and looked up in a set, and
    # each keyed fact's subject and value are worked out once (the old pairwise
    # scan normalised ~950,000 statements for one large principal). Once a part
    # (static or per-round) holds as many survivors as it may ever keep, the
    # rest of it is over_budget without being compared: max_items would drop
    # them anyway, so what is injected does not change.
    # A later round brings no static candidates (checked above), so its static cap is 0.
    static_cap = max(0, policy.max_items - _round_item_reserve(policy)) if cached_static_block is None else 0
    round_cap = max(0, policy.max_items)
    keyed_facts = [candidates[i] for i in eligible] + list(cached_static_facts)
    keyed = [k for k in map(_KeyedValue.of, keyed_facts) if k is not None]
    kept = _KeptStatements(cached_static_facts)
    static_survivors: list[int] = []
    round_survivors: list[int] = []
    # Two active facts giving one attribute different values (stored before the
    # write path could tell, or kept both because the reading was uncertain):
    # only the newer direct evidence is injected (R6, R14).
    # ``rulings``: pairs a reviewer kept both of, and possible conflicts waiting
    # for one (services/conflicts.py).
    losers = contradictions.conflict_losers(keyed_facts, rulings)
    for i in ranked:
        candidate = candidates[i]
        per_round = per_round_kind[candidate.kind]
        bucket, cap = (round_survivors, round_cap) if per_round else (static_survivors, static_cap)
        if len(bucket) >= cap:
            reasons[i] = "over_budget"
        elif kept.repeats(candidate):
            reasons[i] = "duplicate"
        elif candidate.fact_id in losers or (
            candidate.key is None and per_round and _contradicts_any(candidate.statement, keyed)
        ):
            reasons[i] = "conflict_lost"
        else:
            kept.add(candidate)
            bucket.append(i)

    if cached_static_block is None:
        taken_static = static_survivors
        round_slots = policy.max_items - len(taken_static)
    else:
        taken_static = []
        # max_items bounds the whole injected context, cached items included.
        round_slots = policy.max_items - rendering.count_item_lines(cached_static_block)
    taken_round = round_survivors[: max(0, round_slots)]
    for i in round_survivors[len(taken_round) :]:
        reasons[i] = "over_budget"

    line_tokens = [0] * len(candidates)
    accepted, static_block, round_block, context, used, static_used = _pack(
        taken_static,
        taken_round,
        candidates,
        ages,
        tiers,
        policy,
        mode=mode,
        resume_hint=resume_hint,
        cached_static_block=cached_static_block,
        reasons=reasons,
        line_tokens=line_tokens,
    )

    decisions = tuple(
        Decision(
            fact_id=candidate.fact_id,
            decision="excluded" if reasons[i] else "selected",
            reason=reasons[i],
            tier=tiers[i],
            age_days=ages[i],
            scores=scores[i],
            tokens=line_tokens[i],
            per_round=per_round_kind[candidate.kind],
        )
        for i, candidate in enumerate(candidates)
    )
    rank_position = {i: position for position, i in enumerate(ranked)}
    selected = tuple(
        _selected_item(candidates[i], ages[i], tiers[i], line_tokens[i], policy)
        for i in sorted(accepted, key=rank_position.__getitem__)
    )
    return RetrievalPlan(
        decisions=decisions,
        selected=selected,
        static_block=static_block,
        round_block=round_block,
        context=context,
        tokens_used=used,
        token_budget=policy.token_budget,
        ranked=tuple(candidates[i].fact_id for i in ranked),
        static_tokens=static_used,
    )


def cached_selection(
    facts: Sequence[Candidate],
    recorded: Sequence[Mapping[str, Any]],
    policy: PolicySettings,
    *,
    now: datetime,
) -> tuple[tuple[Decision, ...], tuple[SelectedItem, ...]]:
    """Decisions and items for a reused session-start block (R12, R14).

    The block's text is returned byte for byte, so each item is reported as it
    was rendered: the tier, age and tokens ``recorded`` when the block was
    made. Scores are today's, so the event still explains the ranking.
    """
    by_id = {int(r["fact_id"]): r for r in recorded}
    decisions: list[Decision] = []
    items: list[SelectedItem] = []
    for candidate in facts:
        rendered = by_id.get(candidate.fact_id, {})
        age = int(rendered.get("age_days", age_in_days(candidate.last_verified_at, now)))
        tier = str(rendered.get("tier") or "recent")
        tokens = int(rendered.get("tokens", 0))
        decisions.append(
            Decision(
                fact_id=candidate.fact_id,
                decision="selected",
                reason=None,
                tier=tier,
                age_days=age,
                scores=score(candidate, age, policy),
                tokens=tokens,
                per_round=False,
            )
        )
        items.append(_selected_item(candidate, age, tier, tokens, policy))
    return tuple(decisions), tuple(items)


def eligibility(
    candidate: Candidate,
    age: int,
    policy: PolicySettings,
    *,
    now: datetime,
    mode: str,
    verified: bool,
) -> tuple[str | None, str | None]:
    """(exclusion reason or None, tier or None); the order of checks is the contract (R14)."""
    if candidate.status != "active":
        return _STATUS_REASONS.get(candidate.status, "not_active"), None  # R2
    if candidate.kind not in policy.allowed_kinds:
        return "kind_not_allowed", None
    # Validity beats status: a fact past valid_to is never injected even before
    # the expiry sweep has flipped its status (R2, R8).
    if candidate.valid_to is not None and candidate.valid_to <= now:
        return "expired", None
    if candidate.valid_from is not None and candidate.valid_from > now:
        return "not_yet_valid", None
    principal = not candidate.is_project_fact
    if principal and policy.require_identity_verification and not verified:
        return "identity_unverified", None  # R13
    # R9's session mode is about memory from earlier sessions; a slot was said
    # in this very session, so a new or returning principal gets it back as is.
    remembered = principal and candidate.kind != SLOT_KIND
    if remembered and mode == "new":
        return "stale", None  # R9: no principal memory for a new or long-absent principal
    if candidate.authority < policy.min_authority:
        return "below_authority", None
    if age > policy.confirm_days:
        return "stale", None  # R9
    tier = "recent" if age <= policy.recent_days else "confirm"
    if remembered and mode == "confirm":
        tier = "confirm"  # R9: every principal item is re-confirmed in confirm mode
    # Step 4: only per-round kinds face the relevance floor; static memory is
    # ordered by relevance but never excluded for it. Slots are this session's
    # working state and always relevant.
    floor_applies = candidate.kind != SLOT_KIND and policy.is_per_round(candidate.kind)
    if floor_applies and (candidate.relevance is None or candidate.relevance < policy.min_relevance):
        return "low_relevance", tier
    return None, tier


# --- Standing: what the candidate read may leave out ----------------------
#
# The checks of ``eligibility`` that depend on nothing but the fact, the policy
# and the time (status, kind, validity, authority, age), written once as data.
# The candidate read filters with them in SQL (selectors/retrievals.py renders
# STANDING) and the cached project facts are tested with ``stands``, so the
# two can no longer drift apart. A fact that does not stand is excluded by
# ``eligibility`` whatever the session; one that stands may still be excluded
# for identity, session mode or relevance (tests/governance/rules pin both).


@dataclass(frozen=True)
class Condition:
    """``column operator bound``; a NULL column passes when ``null_passes`` (an open validity end)."""

    column: str  # one of CANDIDATE_COLUMNS
    operator: str  # "=", "in", ">=", ">" or "<="
    bound: str  # a key of ``standing_bounds``
    null_passes: bool = False


STANDING: tuple[Condition, ...] = (
    Condition("status", "=", "status"),  # R2
    Condition("kind", "in", "kinds"),
    Condition("authority", ">=", "min_authority"),
    Condition("valid_to", ">", "now", null_passes=True),  # R2, R8
    Condition("valid_from", "<=", "now", null_passes=True),
    # age_in_days(last_verified_at, now) <= confirm_days (R9), as a bound on the column.
    Condition("last_verified_at", ">", "verified_after"),
)

_OPERATORS: dict[str, Any] = {
    "=": operator.eq,
    "in": lambda value, bound: value in bound,
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
}


def standing_bounds(policy: PolicySettings, now: datetime) -> dict[str, Any]:
    """The values STANDING's conditions compare with, for ``policy`` at ``now``."""
    return {
        "status": "active",
        "kinds": list(policy.allowed_kinds),
        "min_authority": policy.min_authority,
        "now": now,
        "verified_after": now - timedelta(days=policy.confirm_days + 1),
    }


def stands(row: Sequence[Any], positions: Mapping[str, int], bounds: Mapping[str, Any]) -> bool:
    """Whether a fact (``row``, its columns at ``positions``) meets every STANDING condition."""
    for condition in STANDING:
        value = row[positions[condition.column]]
        if value is None:
            if condition.null_passes:
                continue
            return False
        if not _OPERATORS[condition.operator](value, bounds[condition.bound]):
            return False
    return True


def _round_item_reserve(policy: PolicySettings) -> int:
    """Item slots kept free of static memory for later rounds (see ROUND_RESERVE_SHARE)."""
    if not policy.per_round_kinds and SLOT_KIND not in policy.allowed_kinds:
        return 0
    return max(1, round(policy.max_items * ROUND_RESERVE_SHARE)) if policy.max_items > 1 else 0


def _round_token_reserve(policy: PolicySettings) -> int:
    if not policy.per_round_kinds and SLOT_KIND not in policy.allowed_kinds:
        return 0
    return int(policy.token_budget * ROUND_RESERVE_SHARE)


def _pack(
    static_ranked: list[int],
    round_ranked: list[int],
    candidates: Sequence[Candidate],
    ages: list[int],
    tiers: list[str | None],
    policy: PolicySettings,
    *,
    mode: str,
    resume_hint: rendering.ResumeHint | str | None,
    cached_static_block: str | None,
    reasons: list[str | None],
    line_tokens: list[int],
) -> tuple[list[int], str, str, str, int, int]:
    """Take items in rank order while the whole rendered context fits (R11).

    Static items go first and may fill the budget only up to the per-round
    reserve (R12 keeps them for the whole session); per-round items then take
    what is left of the full budget. Within each, items are taken in rank
    order and packing stops at the first that does not fit.

    The full context is re-rendered and re-counted for every item: token
    counts are not additive across line joins, and a sum of per-line counts
    could let the block overshoot. (``count_context_tokens`` is the whole
    text's exact count, made of its lines' counts cut where tiktoken's
    pieces end: it only spares encoding the same lines again.) Marks
    ``over_budget`` in ``reasons`` and fills ``line_tokens`` for every item
    it rendered. Returns the accepted indices, the static block, round block
    and context, the context's tokens and the static block's.
    """
    budget = policy.token_budget
    accepted: list[int] = []
    # Each candidate's item and line are made once, not on every trial render:
    # a trial re-renders every item accepted so far.
    made: dict[int, SelectedItem] = {}
    lines: dict[int, str] = {}  # id() of an item in ``made`` -> its rendered line

    def item(i: int) -> SelectedItem:
        found = made.get(i)
        if found is None:
            found = made[i] = _selected_item(candidates[i], ages[i], tiers[i], 0, policy)
            lines[id(found)] = rendering.render_item(found)
        return found

    def line(rendered: rendering.RenderableItem) -> str:
        return lines[id(rendered)]

    def render(indices: list[int]) -> tuple[str, str, str]:
        items = [(candidates[i], item(i)) for i in indices]
        if cached_static_block is not None:
            static = cached_static_block
        else:
            static = rendering.render_static_block(
                mode,
                resume_hint,
                [it for c, it in items if not it.per_round and c.is_project_fact],
                [it for c, it in items if not it.per_round and not c.is_project_fact],
                render=line,
            )
        round_ = rendering.render_round_block([it for _, it in items if it.per_round], render=line)
        return static, round_, rendering.join_context(static, round_)

    static, round_, context = render([])
    used = count_context_tokens(context, policy.encoding)
    # An empty cached block means round 1's header did not fit: round items
    # without the priority statement would break R10, so they wait too.
    if used > budget or cached_static_block == "":
        for i in [*static_ranked, *round_ranked]:
            reasons[i] = "over_budget"
        return [], "", "", "", 0, 0

    def take(ranked: list[int], limit: int) -> None:
        nonlocal static, round_, context, used
        for position, i in enumerate(ranked):
            trial = render([*accepted, i])
            trial_used = count_context_tokens(trial[2], policy.encoding)
            line_tokens[i] = line_token_count(lines[id(item(i))], policy.encoding)
            if trial_used > limit:
                # R11: stop at the first item that does not fit; a smaller,
                # lower-ranked item never jumps the queue.
                for j in ranked[position:]:
                    reasons[j] = "over_budget"
                return
            accepted.append(i)
            (static, round_, context), used = trial, trial_used

    take(static_ranked, budget - _round_token_reserve(policy))
    # No round item yet: the context is the static block alone, and its count is the block's.
    static_used = used
    take(round_ranked, budget)
    return accepted, static, round_, context, used, static_used


@functools.lru_cache(maxsize=8192)
def line_token_count(line: str, encoding: str) -> int:
    """``count_tokens`` of one rendered item line, remembered: a fact's line recurs round after round.

    Bounded: a line is one statement (at most a few thousand characters) and its tag.
    """
    return count_tokens(line, encoding)


def _selected_item(
    candidate: Candidate, age: int, tier: str | None, tokens: int, policy: PolicySettings
) -> SelectedItem:
    return SelectedItem(
        fact_id=candidate.fact_id,
        statement=candidate.statement,
        kind=candidate.kind,
        source_type=candidate.source_type,
        source_ref=candidate.source_ref,
        authority=candidate.authority,
        age_days=age,
        tier=tier or "recent",
        tokens=tokens,
        per_round=is_per_round(candidate.kind, policy),
        is_project_fact=candidate.is_project_fact,
    )


# --- duplicates -----------------------------------------------------------


def normalise_statement(statement: str) -> str:
    """Comparison form: NFKC, case-folded, single-spaced, without closing punctuation."""
    text = unicodedata.normalize("NFKC", statement).casefold()
    return " ".join(text.split()).rstrip(".!?;:, ")


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine similarity, or None when the vectors cannot be compared."""
    if len(a) != len(b) or not a:
        return None
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if norm == 0:
        return None
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm


def _is_duplicate(candidate: Candidate, other: Candidate) -> bool:
    if normalise_statement(candidate.statement) == normalise_statement(other.statement):
        return True
    return _similar_embeddings(candidate, other)


def _similar_embeddings(candidate: Candidate, other: Candidate) -> bool:
    if candidate.embedding is None or other.embedding is None:
        return False
    similarity = cosine(candidate.embedding, other.embedding)
    return similarity is not None and similarity >= DUPLICATE_COSINE


class _KeptStatements:
    """The facts kept so far, for duplicate checks in constant time by normalised text.

    Embedding similarity still compares pairwise, but only against kept facts
    that carry a vector, and the kept set is bounded by max_items.
    """

    def __init__(self, initial: Iterable[Candidate]) -> None:
        self._texts: set[str] = set()
        self._with_vectors: list[Candidate] = []
        for candidate in initial:
            self.add(candidate)

    def repeats(self, candidate: Candidate) -> bool:
        if normalise_statement(candidate.statement) in self._texts:
            return True
        return candidate.embedding is not None and any(
            _similar_embeddings(candidate, other) for other in self._with_vectors
        )

    def add(self, candidate: Candidate) -> None:
        self._texts.add(normalise_statement(candidate.statement))
        if candidate.embedding is not None:
            self._with_vectors.append(candidate)


# --- R18: structured beats similar ----------------------------------------
#
# A snippet "talks about" a key when every word of the key (underscores as
# spaces, stop words dropped) shares a stem with some word of the snippet.
# Stems are approximated by prefixes, which needs no language model and is
# deterministic: two words share a stem when they are equal, or the shorter
# one has at least 3 letters and they agree on their first min(5, len(shorter))
# letters. So key "deployment_region" matches "We deploy in us-east-1 region"
# ("deploy"/"deployment" share "deplo"). The keyed fact's distinguishing value
# is what is left of its statement after removing the key's words and stop
# words ("Deploy to eu-west-2" -> {"eu-west-2"}). The snippet agrees when it
# contains any of those value tokens verbatim; otherwise it is about the same
# subject with a different answer, and the keyed fact wins (conflict_lost).
# A keyed fact whose statement is nothing but its key has no value to compare
# and never excludes anything.

# Tokens keep inner hyphens, dots, colons and slashes so values such as
# "eu-west-2", "3.11" or "10:30" stay whole; underscores split words.
_TOKEN = re.compile(r"[^\W_]+(?:[-.:/][^\W_]+)*")
_WORD = re.compile(r"[^\W_]+")
# fmt: off
_STOP_WORDS = frozenset(
    {
        "a", "an", "the", "to", "in", "on", "at", "of", "for", "from", "by", "with", "and", "or",
        "but", "not", "no", "is", "are", "was", "were", "be", "been", "being", "has", "have", "had",
        "do", "does", "did", "will", "would", "shall", "should", "can", "could", "may", "might",
        "must", "it", "its", "this", "that", "these", "those", "there", "here", "as", "into", "onto",
        "than", "then", "so", "such", "i", "me", "my", "we", "our", "you", "your", "he", "him", "his",
        "she", "her", "they", "them", "their", "user", "users", "now", "currently", "set",
    }
)
# fmt: on


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _words(text: str) -> set[str]:
    return set(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def share_stem(a: str, b: str) -> bool:
    """Whether two lower-case words look like forms of one word (see the R18 note)."""
    if a == b:
        return True
    shorter = min(len(a), len(b))
    if shorter < 3:
        return False
    need = min(5, shorter)
    return a[:need] == b[:need]


def key_words(key: str) -> list[str]:
    """Content words of a key: ``deployment_region`` -> ``["deployment", "region"]``."""
    return [w for w in _WORD.findall(key.casefold()) if w not in _STOP_WORDS]


def _mentions(words: Iterable[str], text_words: set[str]) -> bool:
    return all(any(share_stem(w, t) for t in text_words) for w in words)


def distinguishing_values(statement: str, key: str) -> set[str]:
    """Tokens of a keyed fact's statement that carry its value, not its subject."""
    subject = key_words(key)
    values = set()
    for token in _tokens(statement):
        if token in _STOP_WORDS:
            continue
        parts = _WORD.findall(token)
        # A token that only restates the key ("deploy", "region") is subject.
        if parts and all(any(share_stem(p, w) for w in subject) for p in parts):
            continue
        values.add(token)
    return values


def _contradicts(snippet: str, keyed_fact: Candidate) -> bool:
    """R18: ``snippet`` talks about ``keyed_fact``'s key without its value."""
    keyed = _KeyedValue.of(keyed_fact)
    return keyed is not None and keyed.contradicted_by(snippet)


@dataclass(frozen=True)
class _KeyedValue:
    """A keyed fact's subject words and distinguishing values, worked out once per statement and key."""

    subject: tuple[str, ...]
    values: frozenset[str]

    @classmethod
    def of(cls, fact: Candidate) -> _KeyedValue | None:
        return _keyed_value(fact.statement, fact.key) if fact.key else None

    def contradicted_by(self, snippet: str) -> bool:
        return _contradicts_any(snippet, (self,))


def _contradicts_any(snippet: str, keyed: Sequence[_KeyedValue]) -> bool:
    """Whether ``snippet`` talks about any of the ``keyed`` facts' subjects without its value.

    The snippet is read once for all of them: a large principal has hundreds of
    keyed facts, and reading it again for each was most of this check's time.
    """
    if not keyed:
        return False
    words = _words(snippet)
    tokens: set[str] | None = None
    for fact in keyed:
        if not _mentions(fact.subject, words):
            continue
        if tokens is None:
            tokens = set(_tokens(snippet))
        if not fact.values & tokens:
            return True
    return False


@functools.lru_cache(maxsize=8192)
def _keyed_value(statement: str, key: str) -> _KeyedValue | None:
    """Cached: a principal's keyed facts come back round after round, and the
    answer (immutable) depends on the text and key alone."""
    subject = key_words(key)
    values = distinguishing_values(statement, key)
    # No subject or no value: nothing to compare, it never excludes anything.
    if not subject or not values:
        return None
    return _KeyedValue(tuple(subject), frozenset(values))


def freshness_tier(age_days: int, policy: PolicySettings) -> str:
    """R9's tier by age alone, for showing what an agent holds: ``recent``, ``confirm`` or ``stale``.

    A retrieval also weighs status, validity, authority and session mode
    (``eligibility``); this is only the age part, for a fact already active.
    """
    if age_days <= policy.recent_days:
        return "recent"
    return "confirm" if age_days <= policy.confirm_days else "stale"
