"""The retrieval candidate read: one statement, eligibility in SQL, scope kept (R1, R2, R9, R14)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from django.utils import timezone

from governance.models import Fact, Project
from governance.rules.policy import PolicySettings
from governance.selectors import retrievals as selectors
from tests.personas import FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db

POLICY = PolicySettings()
DIM = 384


def unit(axis: int, tilt: float = 0.0) -> list[float]:
    """A unit-ish vector along ``axis``, tilted towards the next axis."""
    vector = [0.0] * DIM
    vector[axis] = 1.0
    vector[(axis + 1) % DIM] = tilt
    return vector


@pytest.fixture
def people(project: Project) -> dict[str, Any]:
    alice = PrincipalFactory(project=project, external_id="alice")
    bob = PrincipalFactory(project=project, external_id="bob")
    now = timezone.now()
    facts = {
        "profile": FactFactory(
            project=project, principal=alice, kind="profile", statement="Alice lives in Porto"
        ),
        "project": FactFactory(project=project, kind="project_fact", statement="Support hours are 9 to 5"),
        "superseded": FactFactory(project=project, principal=alice, status="superseded", statement="Lisbon"),
        "low": FactFactory(project=project, principal=alice, authority=1, statement="Alice is a cat herder"),
        "stale": FactFactory(
            project=project, principal=alice, source_observed_at=now - timedelta(days=POLICY.confirm_days + 5)
        ),
        "expired": FactFactory(project=project, principal=alice, valid_to=now - timedelta(hours=1)),
        "near": FactFactory(project=project, principal=alice, kind="episodic", embedding=unit(0, 0.1)),
        "far": FactFactory(project=project, principal=alice, kind="episodic", embedding=unit(5)),
        # The closest vector of all, but no longer true: never a nearest neighbour.
        "near_superseded": FactFactory(
            project=project, principal=alice, kind="episodic", status="superseded", embedding=unit(0)
        ),
        "bob": FactFactory(project=project, principal=bob, statement="Bob lives in Oslo", embedding=unit(0)),
    }
    return {"alice": alice, "bob": bob, "facts": facts, "now": now}


def test_round_one_reads_every_candidate_in_one_statement(
    project: Project, people: dict[str, Any], django_assert_num_queries: Any
) -> None:
    facts = people["facts"]
    with django_assert_num_queries(1):
        candidates = selectors.candidates(
            project, people["alice"], None, POLICY, unit(0), now=people["now"], session_start=True
        )
    by_id = {c.fact_id: c for c in candidates}
    # Eligible static memory, the project's facts among it (R1).
    assert facts["profile"].pk in by_id and facts["project"].pk in by_id
    # What cannot be injected still comes along, so the event says why (R14).
    for name in ("superseded", "low", "stale", "expired", "near_superseded"):
        assert facts[name].pk in by_id, name
    # Per-round kinds by similarity, the nearest first.
    assert by_id[facts["near"].pk].relevance == pytest.approx(1 / (1 + 0.01) ** 0.5, abs=1e-3)
    # Another person's memory never (R1).
    assert facts["bob"].pk not in by_id
    assert len(by_id) == len(candidates)  # no fact twice


def test_nearest_neighbours_are_only_facts_that_could_be_injected(
    project: Project, people: dict[str, Any], django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(1):
        later = selectors.candidates(
            project, people["alice"], None, POLICY, unit(0), now=people["now"], session_start=False
        )
    assert [c.fact_id for c in later] == [people["facts"]["near"].pk, people["facts"]["far"].pk]


def test_facts_past_their_validity_or_below_the_floor_are_not_nearest_neighbours(
    project: Project, people: dict[str, Any]
) -> None:
    alice, now = people["alice"], people["now"]
    # factory_boy's stubs type a factory call as the factory, not the model it makes.
    low = cast(
        Fact, FactFactory(project=project, principal=alice, kind="episodic", authority=1, embedding=unit(0))
    )
    ended = cast(
        Fact,
        FactFactory(
            project=project,
            principal=alice,
            kind="episodic",
            valid_to=now - timedelta(minutes=1),
            embedding=unit(0),
        ),
    )
    later = selectors.candidates(project, alice, None, POLICY, unit(0), now=now, session_start=False)
    assert low.pk not in {c.fact_id for c in later} and ended.pk not in {c.fact_id for c in later}


def test_last_interaction_is_one_probe_of_the_principals_active_facts(
    project: Project, people: dict[str, Any], django_assert_num_queries: Any
) -> None:
    alice = people["alice"]
    newest = timezone.now() - timedelta(hours=2)
    FactFactory(project=project, principal=alice, source_observed_at=newest)
    # Newer, but not active: it says nothing about when Alice was last heard from.
    FactFactory(project=project, principal=alice, status="rejected", source_observed_at=timezone.now())
    with django_assert_num_queries(1):
        seen = selectors.last_interaction(alice)
    assert seen == newest
