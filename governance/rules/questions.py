"""The seven questions a memory design must answer, per agent (issue 14 item 7, docs/quality.md).

Pure: an agent's policy and figures measured from its traffic in, plain
answers out. A question is *open* when the configuration leaves it
unanswered: a setting nobody has decided (still the shipped default where the
default cannot know the product), a guardrail turned off, or a figure the
design needs but the traffic cannot give (no feedback, say). Open questions
are what a product manager reviewing a memory feature should finish first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from governance.rules.labels import label_for
from governance.rules.policy import PolicySettings

DEFAULTS = PolicySettings()
# An external id this short, or made of letters only (a first name), is a weak
# signal that the right person is meant: two people share it easily (R13).
WEAK_ID_MAX_LENGTH = 7
SESSION_MODE_WORDS = {
    "resume": "Sessions that resumed where the last one left off",
    "confirm": "Sessions that first asked the person to confirm",
    "new": "Sessions that started afresh, without memory of the person",
}


@dataclass(frozen=True)
class Traffic:
    """What the agent's retrievals in the window show (selectors.questions)."""

    days: int
    retrievals: int = 0
    # Set when the window held more retrievals than the figures read: they are
    # the newest ones, from ``since`` on (selectors.metrics.bounded).
    since: datetime | None = None
    first_rounds: int = 0
    later_rounds: int = 0  # rounds after the first, within a session
    later_reused: int = 0  # of those, the session-start block was reused byte for byte
    identity_verified: int = 0
    p50_tokens: float | None = None
    p95_tokens: float | None = None
    modes: Mapping[str, int] = field(default_factory=dict)
    feedback: int = 0
    principals: int = 0
    weak_principals: int = 0


@dataclass(frozen=True)
class Question:
    number: int
    title: str
    answers: tuple[tuple[str, str], ...]
    open: tuple[str, ...] = ()  # what the configuration leaves unanswered, in plain words
    notes: tuple[str, ...] = ()  # what the traffic cannot tell yet (no figures), not a gap

    @property
    def answered(self) -> bool:
        return not self.open


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.0f}%)" if whole else "none yet"


def _kinds(kinds: tuple[str, ...]) -> str:
    return ", ".join(label_for("kind", kind).text for kind in kinds) or "none"


def _default(policy: PolicySettings, *names: str) -> bool:
    return all(getattr(policy, name) == getattr(DEFAULTS, name) for name in names)


def when_injected(policy: PolicySettings, traffic: Traffic) -> Question:
    static = tuple(k for k in policy.allowed_kinds if k not in policy.per_round_kinds)
    per_round = tuple(k for k in policy.per_round_kinds if k in policy.allowed_kinds)
    gaps = []
    if not policy.allowed_kinds:
        gaps.append("No kind of memory is allowed: the agent is never given anything.")
    if set(policy.per_round_kinds) - set(policy.allowed_kinds):
        gaps.append("Some kinds are marked for every round but are not allowed at all.")
    return Question(
        1,
        "When is memory injected?",
        (
            ("Once, at the start of a session", _kinds(static)),
            ("Again on every round, found by the question asked", _kinds(per_round)),
            ("Retrievals at a session's start", _share(traffic.first_rounds, traffic.retrievals)),
            ("Retrievals on later rounds", _share(traffic.later_rounds, traffic.retrievals)),
        ),
        tuple(gaps),
    )


def signal(policy: PolicySettings, traffic: Traffic) -> Question:
    gaps = []
    if not policy.require_identity_verification:
        gaps.append(
            "Memory about a person is given without asking the agent to confirm who it is talking to: "
            "nothing guards against giving one person's memory to another."
        )
    if traffic.weak_principals:
        gaps.append(
            f"{traffic.weak_principals} of the people seen are named by a short or name-like id "
            "that two people could share: ask the agent to send a stronger id."
        )
    notes = () if traffic.principals else ("No person was named in this period.",)
    return Question(
        2,
        "Which signal says who the memory is about?",
        (
            ("Identity must be verified", "yes" if policy.require_identity_verification else "no"),
            (
                "Retrievals that asserted a verified identity",
                _share(traffic.identity_verified, traffic.retrievals),
            ),
            ("People seen, with a weak id", _share(traffic.weak_principals, traffic.principals)),
        ),
        tuple(gaps),
        notes,
    )


def ranking(policy: PolicySettings, traffic: Traffic) -> Question:
    gaps = []
    if _default(policy, "weight_relevance", "weight_freshness", "weight_confidence", "decay_half_life_days"):
        gaps.append(
            "The ranking weights are still the shipped defaults: nobody has tuned them for this agent."
        )
    return Question(
        3,
        "How is memory ranked?",
        (
            ("Weight of relevance to the question", f"{policy.weight_relevance:g}"),
            ("Weight of freshness", f"{policy.weight_freshness:g}"),
            ("Weight of confidence and authority", f"{policy.weight_confidence:g}"),
            ("Freshness halves every (days)", f"{policy.decay_half_life_days:g}"),
            ("Least relevance for per-round memory", f"{policy.min_relevance:g}"),
            ("Most items per block", str(policy.max_items)),
        ),
        tuple(gaps),
    )


def budget(policy: PolicySettings, traffic: Traffic) -> Question:
    gaps = []
    if _default(policy, "token_budget"):
        gaps.append(
            "The token budget is still the shipped default: nobody has sized it for this agent's prompt."
        )
    notes: tuple[str, ...] = ()
    if traffic.p50_tokens is None:
        notes = ("No retrieval in this period: nothing measured yet.",)

    def tokens(value: float | None) -> str:
        return (
            "—"
            if value is None
            else f"{value:.0f} tokens ({100 * value / policy.token_budget:.0f}% of the budget)"
        )

    return Question(
        4,
        "How much memory fits, and how much is used?",
        (
            ("Budget configured", f"{policy.token_budget} tokens"),
            ("Median tokens per round", tokens(traffic.p50_tokens)),
            ("95th percentile tokens per round", tokens(traffic.p95_tokens)),
        ),
        tuple(gaps),
        notes,
    )


def guardrails(policy: PolicySettings, traffic: Traffic) -> Question:
    gaps = []
    if not policy.require_identity_verification:
        gaps.append("The identity guard is off.")
    if policy.min_authority < DEFAULTS.min_authority:
        gaps.append(
            f"The authority floor is {policy.min_authority}, below the shipped {DEFAULTS.min_authority}: "
            "chat messages, guesses and web pages may be given."
        )
    if policy.auto_approve_min_authority < DEFAULTS.auto_approve_min_authority:
        gaps.append(
            f"Writes from authority {policy.auto_approve_min_authority} skip review, "
            f"below the shipped {DEFAULTS.auto_approve_min_authority}."
        )
    return Question(
        5,
        "Which guardrails hold?",
        (
            ("Authority floor (1-5)", str(policy.min_authority)),
            ("Writes skip review from authority", str(policy.auto_approve_min_authority)),
            ("Write guard", "always on: suspicious writes wait for a person"),
            ("Identity guard", "on" if policy.require_identity_verification else "off"),
        ),
        tuple(gaps),
    )


def state(policy: PolicySettings, traffic: Traffic) -> Question:
    total = sum(traffic.modes.values())
    answers = [
        ("Resume a returning person within (days)", str(policy.session_resume_days)),
        ("Ask to confirm within (days)", str(policy.session_confirm_days)),
    ]
    for mode, words in SESSION_MODE_WORDS.items():
        answers.append((words, _share(traffic.modes.get(mode, 0), total)))
    gaps = []
    if _default(policy, "session_resume_days", "session_confirm_days"):
        gaps.append("When a returning person is resumed or asked to confirm is still the shipped default.")
    notes = () if total else ("No session started in this period.",)
    return Question(6, "What state carries across sessions?", tuple(answers), tuple(gaps), notes)


def observability(policy: PolicySettings, traffic: Traffic) -> Question:
    gaps = []
    if traffic.retrievals and not traffic.feedback:
        gaps.append(
            "The agent sends no feedback on what it used: nobody can tell whether memory helped, "
            "or whether it acted on something that had changed."
        )
    return Question(
        7,
        "What can be observed?",
        (
            ("Retrievals logged, each with every candidate and why", str(traffic.retrievals)),
            ("Retrievals with the agent's feedback", _share(traffic.feedback, traffic.retrievals)),
            (
                "Later rounds that reused the session-start block byte for byte",
                _share(traffic.later_reused, traffic.later_rounds),
            ),
        ),
        tuple(gaps),
    )


QUESTIONS = (when_injected, signal, ranking, budget, guardrails, state, observability)


def seven_questions(policy: PolicySettings, traffic: Traffic) -> list[Question]:
    return [question(policy, traffic) for question in QUESTIONS]


def is_weak_identifier(external_id: str) -> bool:
    """The same test ``selectors.questions`` runs in SQL, for the tests and the docs."""
    return len(external_id) <= WEAK_ID_MAX_LENGTH or external_id.isalpha()
