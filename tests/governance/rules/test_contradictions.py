"""Contradictions without a key: key inference, value extraction, conflict (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from governance.rules.contradictions import (
    SELF,
    Statement,
    claims_conflict,
    claims_of,
    conflict_losers,
    contradiction,
    infer_key,
    is_conflict_review,
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
