"""Contradictions without a key: key inference, value extraction, conflict (pure)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from governance.rules import contradictions
from governance.rules.contradictions import (
    DIRECT_SOURCES,
    SELF,
    PairRulings,
    claims_conflict,
    claims_of,
    conflict_losers,
    contradiction,
    infer_key,
    is_conflict_review,
    is_newer,
    key_attribute,
    similar_conflict,
)

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parents[2] / "data" / "contradictions.yaml").read_text()
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['older'][:30]}|{c['newer'][:30]}")
def test_the_labelled_set(case: dict[str, Any]) -> None:
    if "newer_principal" in case:
        pytest.skip("different principals are never compared; the API test covers it")
    found = contradiction(case["newer"], case["older"])
    assert (found is not None) == case["contradicts"], found


@pytest.mark.parametrize(
    ("statement", "attribute"),
    [
        ("I use Python for most of my work.", "programming_language"),
        ("I live in Leeds.", "city"),
        ("I live in France.", "country"),
        ("I work at Acme Corp.", "employer"),
        ("I'm a data engineer.", "role"),
        ("We deploy to eu-west-2.", "region"),
        ("My time zone is Europe/London.", "timezone"),
        ("We run PostgreSQL 17.", "version:postgresql"),
        ("I prefer dark mode.", "ui_theme"),
        ("I switched to VS Code.", "editor"),
        ("Please contact me by email.", "contact_channel"),
        ("Please reply in German.", "reply_language"),
        ("I enjoy hiking on weekends.", None),
        ("I go to the gym on Mondays.", None),
        ("My sister lives in Paris.", None),  # about someone else
    ],
)
def test_infer_key(statement: str, attribute: str | None) -> None:
    assert infer_key(statement) == attribute


@pytest.mark.parametrize(
    ("key", "attribute"),
    [
        ("primary_language", "programming_language"),
        ("deployment_region", "region"),
        ("home_city", "city"),
        ("employer", "employer"),
        ("job_title", "role"),
        ("postgres_version", "version:postgresql"),
        ("node_version", "version:node"),
        ("favourite_colour", None),
        (None, None),
    ],
)
def test_key_attribute(key: str | None, attribute: str | None) -> None:
    assert key_attribute(key) == attribute


def test_a_bare_keyed_statement_is_read_as_its_key() -> None:
    (claim,) = claims_of("Rust", "primary_language")
    assert (claim.attribute, claim.values, claim.subject) == (
        "programming_language",
        frozenset({"rust"}),
        SELF,
    )
    assert contradiction("I write all my scripts in Python.", "Rust", old_key="primary_language")


def test_from_to_marks_the_old_value_as_left_behind() -> None:
    claims = claims_of("I moved from Ruby to Elixir.")
    assert {(c.values, c.negated) for c in claims if c.attribute == "programming_language"} == {
        (frozenset({"elixir"}), False),
        (frozenset({"ruby"}), True),
    }


def test_a_denial_contradicts_what_it_denies_only() -> None:
    assert contradiction("I no longer use JavaScript.", "I code in JavaScript.")
    assert contradiction("I no longer use JavaScript.", "I code in Python.") is None
    assert contradiction("I don't use Java.", "I never use Java.") is None


def test_scopes_decide() -> None:
    assert contradiction("I use Rust for services.", "I use Python for scripts.") is None
    assert contradiction("I use Rust for scripts.", "I use Python for scripts.")
    # An unscoped switch covers every scope.
    assert contradiction("I write all my scripts in Python.", "I've switched to Rust.")


def test_additions_and_shared_values_are_not_contradictions() -> None:
    assert contradiction("I also use Rust.", "I use Python.") is None
    assert contradiction("I use Go.", "I use Python and Go.") is None


def test_versions_compare_by_prefix_and_product() -> None:
    assert contradiction("We use PostgreSQL 15.4.", "We use PostgreSQL 15.") is None
    assert contradiction("We use PostgreSQL 16.", "We use PostgreSQL 15.")
    assert contradiction("We use Redis 7.", "We use PostgreSQL 15.") is None
    # Numbers with units are not versions.
    assert claims_of("Python takes 15 seconds to start.") == ()


def test_future_plans_and_visits_are_not_residence() -> None:
    assert claims_of("I'm moving to Berlin next month.") == ()
    assert claims_of("I visited Paris last week.") == ()
    assert claims_of("I was born in York.") == ()


def test_hedged_statements_are_uncertain() -> None:
    found = contradiction("I think I live in York now.", "I live in Leeds.")
    assert found is not None and not found.certain
    sure = contradiction("I live in York now.", "I live in Leeds.")
    assert sure is not None and sure.certain


def test_detail_is_plain_words() -> None:
    found = contradiction("I've switched to Rust.", "I use Python.")
    assert found is not None
    assert found.detail() == "Gives a different programming language (rust instead of python)."


def test_claims_of_different_subjects_never_conflict() -> None:
    (mine,) = claims_of("I live in Leeds.")
    (hers,) = claims_of("My sister lives in Paris.")
    assert hers.subject == "sister"
    assert not claims_conflict(hers, mine)


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class Statement:
    """An active fact as ``conflict_losers`` reads it (``contradictions.Comparable``), and no more."""

    fact_id: int
    statement: str
    key: str | None
    kind: str
    is_project_fact: bool
    source_type: str
    when: datetime  # the fact's last verification
    stored_claims: str | None = None


def st(fact_id: int, statement: str, *, days: int, source: str = "user_statement", **kw: Any) -> Statement:
    return Statement(
        fact_id=fact_id,
        statement=statement,
        key=kw.get("key"),
        kind=kw.get("kind", "profile"),
        is_project_fact=kw.get("project", False),
        source_type=source,
        when=NOW - timedelta(days=days),
    )


def test_the_newer_side_of_a_pair_wins() -> None:
    assert conflict_losers([st(1, "I live in Leeds.", days=5), st(2, "I live in York.", days=1)]) == {1: 2}


def test_hearsay_does_not_beat_the_persons_word() -> None:
    losers = conflict_losers(
        [st(1, "I live in Leeds.", days=5), st(2, "The user lives in York.", days=1, source="web_page")]
    )
    assert losers == {2: 1}


def test_a_keyed_fact_beats_an_unkeyed_one() -> None:
    losers = conflict_losers(
        [st(1, "Rust", days=5, key="primary_language"), st(2, "I write my scripts in Python.", days=1)]
    )
    assert losers == {2: 1}


def test_project_and_principal_facts_are_not_compared() -> None:
    assert (
        conflict_losers([st(1, "We use Python.", days=5, project=True), st(2, "I use Rust.", days=1)]) == {}
    )


def _losers_pairwise(statements: Sequence[Statement], kept: frozenset[frozenset[int]]) -> dict[int, int]:
    """conflict_losers as it was before it grouped facts by their claims: every pair sharing a topic."""
    claims = {
        s.fact_id: claims_of(s.statement, s.key) for s in statements if s.kind not in ("slot", "summary")
    }
    compared = [s for s in statements if claims.get(s.fact_id)]
    groups: dict[tuple[str, str], list[int]] = {}
    for index, s in enumerate(compared):
        for topic in {(c.attribute, c.subject) for c in claims[s.fact_id]}:
            groups.setdefault(topic, []).append(index)
    pairs = sorted(
        {(i, j) for members in groups.values() for n, i in enumerate(members) for j in members[n + 1 :]}
    )
    losers: dict[int, int] = {}
    for i, j in pairs:
        a, b = compared[i], compared[j]
        if a.is_project_fact != b.is_project_fact or frozenset((a.fact_id, b.fact_id)) in kept:
            continue
        newer, older = (a, b) if is_newer(a, b) else (b, a)
        if (
            contradiction("", "", new_claims=claims[newer.fact_id], old_claims=claims[older.fact_id]) is None
            and contradiction("", "", new_claims=claims[older.fact_id], old_claims=claims[newer.fact_id])
            is None
        ):
            continue
        if bool(newer.key) != bool(older.key):
            winner, loser = (newer, older) if newer.key else (older, newer)
        elif newer.source_type not in DIRECT_SOURCES and older.source_type in DIRECT_SOURCES:
            winner, loser = older, newer
        else:
            winner, loser = newer, older
        losers.setdefault(loser.fact_id, winner.fact_id)
    return losers


_WORDINGS = [
    ("I live in Leeds.", None),
    ("I live in York.", None),
    ("I live in Paris.", None),
    ("I no longer live in Leeds.", None),
    ("My sister lives in York.", None),
    ("I use Python.", None),
    ("I use Rust.", None),
    ("I also use Go.", None),
    ("I use Python for scripts.", None),
    ("I use Python and Go.", None),
    ("I might use Go.", None),
    ("Rust", "primary_language"),
    ("Python", "primary_language"),
    ("I use PostgreSQL 15.4.", None),
    ("I use PostgreSQL 15.", None),
    ("I use PostgreSQL 16.", None),
    ("Prefers dark mode and email (note 3)", None),
    ("Prefers light mode (note 4)", None),
    ("Prefers dark mode (note 5)", "slot_5"),
    ("Prefers window seats (note 6)", None),
]


@pytest.mark.parametrize("seed", range(6))
def test_many_facts_lose_as_comparing_every_pair_would(seed: int) -> None:
    # Thousands of facts repeating a few claims (a large principal): the grouped
    # comparison must name the same losers, winners and order as the pairwise one.
    rng = random.Random(seed)
    facts = []
    for fact_id in rng.sample(range(1, 100_000), 2_000):
        statement, key = rng.choice(_WORDINGS)
        facts.append(
            st(
                fact_id,
                statement,
                days=rng.randrange(0, 30),  # many ties on time: the id decides
                key=key,
                kind=rng.choice(("profile", "preference", "preference", "summary")),
                project=rng.random() < 0.2,
                source=rng.choice(("user_statement", "config", "web_page", "inference")),
            )
        )
    ids = [s.fact_id for s in facts]
    kept = frozenset(frozenset(rng.sample(ids, 2)) for _ in range(200))
    losers = conflict_losers(facts, PairRulings(kept=kept))
    assert list(losers.items()) == list(_losers_pairwise(facts, kept).items())
    assert len(losers) > 500


def test_facts_repeating_one_claim_are_compared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # One topic, two answers, a thousand facts: comparing pairs of facts made ~500,000 comparisons.
    calls = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return contradiction(*args, **kwargs)

    monkeypatch.setattr(contradictions, "contradiction", counted)
    facts = [st(i, "I live in Leeds." if i % 2 else "I live in York.", days=i % 40) for i in range(1, 1_001)]
    losers = conflict_losers(facts)
    assert len(calls) <= 6
    assert losers == _losers_pairwise(facts, frozenset())


def test_a_fact_beaten_by_several_maps_to_the_first_listed() -> None:
    facts = [
        st(5, "I live in York.", days=1),
        st(3, "I live in Leeds.", days=9),
        st(4, "I live in Paris.", days=2),
    ]
    assert conflict_losers(facts) == {3: 5, 4: 5}


def test_summaries_and_slots_are_not_compared() -> None:
    assert (
        conflict_losers([st(1, "I live in Leeds.", days=5, kind="summary"), st(2, "I live in York.", days=1)])
        == {}
    )


def test_an_occasion_or_a_plan_is_never_a_similar_conflict() -> None:
    # Near-misses from governance/scenarios/contradiction_near_misses.yaml: similar wording,
    # a different place, but no current value given, so the standing fact must stay injected.
    lives = "I live in Leeds."
    assert similar_conflict("I visited Paris last week.", lives, 0.9) is None
    assert similar_conflict("I'm thinking about moving to Berlin next year.", lives, 0.9) is None
    # A standing value that differs is still put before a reviewer.
    found = similar_conflict("My locker number is 17.", "My locker number is 41.", 0.9)
    assert found is not None and found.kinds


def test_a_conflict_review_is_the_systems_check_with_an_older_fact_named() -> None:
    assert is_conflict_review("conflict-check:fact-12", 11)
    # A write that names the older fact but came from an agent, or the system's
    # reference without an older fact: not conflict reviews.
    assert not is_conflict_review("chat:42", 11)
    assert not is_conflict_review("conflict-check:fact-12", None)


# --- stored claims ----------------------------------------------------------

ROOT = Path(__file__).parents[3]
KEYS = (None, "primary_language", "home_city", "country", "timezone", "editor", "deployment_region")


def _corpus() -> list[tuple[str, str | None]]:
    """Statements the reader finds claims in and statements it finds none in, each read under several keys."""
    texts = {text for text, _ in _WORDINGS}
    for case in CASES:
        texts |= {case["older"], case["newer"]}
    for name in ("benign.jsonl", "attacks.jsonl"):
        for line in (ROOT / "tests" / "data" / "guard" / name).read_text().splitlines():
            texts.add(json.loads(line)["text"])
    for scenario in sorted((ROOT / "governance" / "scenarios").glob("*.yaml")):
        for step in yaml.safe_load(scenario.read_text()).get("steps", []):
            for action in step.values() if isinstance(step, dict) else ():
                if isinstance(action, dict) and isinstance(action.get("statement"), str):
                    texts.add(action["statement"])
    variants = {
        variant
        for text in texts
        for variant in (
            *(f"{hedge} {text[:1].lower()}{text[1:]}" for hedge in _HEDGES),
            text.upper(),
            text.replace(" ", "  "),
            text.rstrip(".") + " too.",
            text.rstrip(".") + " next month.",
            text.replace(" I ", " I no longer ", 1),
        )
    }
    return [(text, key) for text in sorted(texts) for key in KEYS] + [
        (text, None) for text in sorted(variants)
    ]


# Words a claim's qualities turn on (hedged, negated, future), put in front of the corpus's statements.
_HEDGES = (
    *("I think", "Maybe", "Perhaps", "Probably", "I guess", "Possibly", "Sometimes", "Apparently"),
    *("I believe", "Not sure, but", "Occasionally", "Also,", "In addition,", "No longer:", "Soon,"),
)


def test_stored_claims_give_back_what_the_reader_read(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = _corpus()
    stored = [contradictions.stored_claims(text, key) for text, key in corpus]
    expected = [claims_of(text, key) for text, key in corpus]
    assert sum(1 for claims in expected if claims) > 300  # the corpus exercises the reader

    # A process that has read none of them reads none of them again.
    monkeypatch.setattr(contradictions, "claims_of", _no_reading)
    contradictions._trusted_claims.cache_clear()
    try:
        taken = [
            contradictions.claims_from_store(s, text, key)
            for s, (text, key) in zip(stored, corpus, strict=True)
        ]
    finally:
        contradictions._trusted_claims.cache_clear()
    assert taken == expected


def _no_reading(statement: str, key: str | None = None) -> tuple[contradictions.Claim, ...]:
    raise AssertionError(f"read {statement!r} again")


def test_claims_stored_from_another_statement_key_or_reader_are_read_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leeds = contradictions.stored_claims("I live in Leeds.", None)
    # The statement changed under its stored claims (a path that did not store them again).
    assert contradictions.claims_from_store(leeds, "I enjoy walks around Leeds.", None) == ()
    (york,) = contradictions.claims_from_store(leeds, "I live in York.", None)
    assert york.values == frozenset({"york"})
    # A bare value means something else under another key.
    rust = contradictions.stored_claims("Rust", None)
    (language,) = contradictions.claims_from_store(rust, "Rust", "primary_language")
    assert language.attribute == "programming_language"
    # A reader that changed since: what an older one stored is not trusted.
    monkeypatch.setattr(contradictions, "CLAIMS_VERSION", contradictions.CLAIMS_VERSION + 1)
    assert not contradictions.holds_claims_of(leeds, "I live in Leeds.", None)
    assert contradictions.holds_claims_of(
        contradictions.stored_claims("I live in Leeds.", None), "I live in Leeds.", None
    )


def test_the_claims_version_names_what_the_reader_reads() -> None:
    # Stored claims are trusted by CLAIMS_VERSION: a change to what the reader
    # finds must raise it (then pin the new digest here), or retrieval would
    # keep the claims an older reader stored.
    claims = [
        contradictions.stored_claims(text, key)[contradictions._CHECK_CHARS :] for text, key in _corpus()
    ]
    digest = hashlib.sha256("\n".join(claims).encode()).hexdigest()
    assert (contradictions.CLAIMS_VERSION, digest) == (
        1,
        "e1acef04911e6da4f82581daf73d36db8f886f39f65e21164721bd86537573a8",
    )


@pytest.mark.parametrize("seed", range(3))
def test_facts_with_stored_claims_lose_as_facts_read_afresh(seed: int) -> None:
    rng = random.Random(seed)
    facts = []
    for fact_id in rng.sample(range(1, 100_000), 1_000):
        statement, key = rng.choice(_WORDINGS)
        fact = st(fact_id, statement, days=rng.randrange(0, 30), key=key, project=rng.random() < 0.2)
        roll = rng.random()
        # Stored for this statement, for another (ignored), or not stored.
        if roll < 0.6:
            fact.stored_claims = contradictions.stored_claims(statement, key)
        elif roll < 0.8:
            fact.stored_claims = contradictions.stored_claims(rng.choice(_WORDINGS)[0], key)
        facts.append(fact)
    bare = [replace(fact, stored_claims=None) for fact in facts]
    assert conflict_losers(facts) == conflict_losers(bare)
    assert len(conflict_losers(bare)) > 100
