"""selectors.reviews: the similar facts shown beside a pending write (by embedding)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import Fact, Principal
from governance.selectors import reviews as review_selectors
from tests.governance.review_helpers import propose
from tests.personas import AgentPersona, FactFactory

pytestmark = pytest.mark.django_db

UNIT = [1.0] + [0.0] * 383
CLOSE = [0.95, 0.31] + [0.0] * 382


def embed(fact: Fact, vector: list[float], *, verified_days_ago: int = 0) -> None:
    now = timezone.now()
    Fact.objects.filter(pk=fact.pk).update(
        embedding=vector, embedded_at=now, last_verified_at=now - timedelta(days=verified_days_ago)
    )


def similar_statements(write_id: int) -> list[str]:
    from governance.models import Write

    write = Write.objects.select_related("fact").get(pk=write_id)
    found = review_selectors._similar_facts([write], exclude={})
    return [s.fact.statement for s in found.get(write.pk, [])]


def test_only_the_same_persons_facts_are_compared(support_bot: AgentPersona, project) -> None:
    write = propose(support_bot, "Likes strong black coffee in the morning")
    assert write.fact is not None
    embed(write.fact, UNIT)
    mine = FactFactory.create(project=project, principal=write.principal, statement="Drinks espresso")
    other = Principal.objects.create(project=project, external_id="bob")
    theirs = FactFactory.create(project=project, principal=other, statement="Bob drinks espresso")
    shared = FactFactory.create(project=project, principal=None, statement="The office serves espresso")
    for fact in (mine, theirs, shared):
        embed(fact, CLOSE)

    assert similar_statements(write.pk) == ["Drinks espresso"]


def test_a_person_with_many_facts_is_compared_with_their_newest(
    support_bot: AgentPersona, project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool is bounded (EMBEDDING_POOL_PER_PRINCIPAL) so a large principal's page stays fast."""
    monkeypatch.setattr(review_selectors, "EMBEDDING_POOL_PER_PRINCIPAL", 2)
    write = propose(support_bot, "Likes strong black coffee in the morning")
    assert write.fact is not None
    embed(write.fact, UNIT)
    old = FactFactory.create(project=project, principal=write.principal, statement="Drank espresso in 2019")
    embed(old, CLOSE, verified_days_ago=400)
    for n in range(2):
        newer = FactFactory.create(project=project, principal=write.principal, statement=f"Owns bike {n}")
        embed(newer, [0.0, 0.0, 1.0] + [0.0] * 381, verified_days_ago=n)

    assert "Drank espresso in 2019" not in similar_statements(write.pk)
    monkeypatch.setattr(review_selectors, "EMBEDDING_POOL_PER_PRINCIPAL", 1000)
    assert similar_statements(write.pk) == ["Drank espresso in 2019"]


def test_writes_of_two_people_on_one_page_each_get_their_own_persons_facts(
    support_bot: AgentPersona, project
) -> None:
    # The page reads each person's pool once; a write never takes its nearest
    # from the other person's pool, even when that fact is closer.
    from governance.models import Write

    alice_write = propose(support_bot, "Likes strong black coffee in the morning", principal="alice")
    bob_write = propose(support_bot, "Takes green tea after lunch", principal="bob", key="drink")
    alices = FactFactory.create(project=project, principal=alice_write.principal, statement="Drinks espresso")
    bobs = FactFactory.create(project=project, principal=bob_write.principal, statement="Brews sencha")
    for write in (alice_write, bob_write):
        assert write.fact is not None
        embed(write.fact, UNIT)
    embed(alices, [0.9, 0.44] + [0.0] * 382)
    embed(bobs, [0.99, 0.14] + [0.0] * 382)
    writes = list(Write.objects.select_related("fact").filter(pk__in=[alice_write.pk, bob_write.pk]))

    found = review_selectors._similar_facts(writes, exclude={})

    assert [s.fact.statement for s in found[alice_write.pk]] == ["Drinks espresso"]
    assert [s.fact.statement for s in found[bob_write.pk]] == ["Brews sencha"]
    assert {s.method for similar in found.values() for s in similar} == {"embedding"}


@pytest.mark.parametrize("by", ["embedding", "text"])
def test_a_write_about_no_one_is_compared_with_the_projects_facts_about_no_one(
    support_bot: AgentPersona, project, by: str
) -> None:
    write = propose(support_bot, "The office closes at six on Fridays", principal=None, kind="profile")
    assert write.fact is not None
    shared = FactFactory.create(
        project=project, principal=None, statement="The office closes at five on Fridays"
    )
    personal = FactFactory.create(
        project=project,
        principal=Principal.objects.create(project=project, external_id="dana"),
        statement="The office closes at six on Fridays for Dana",
    )
    if by == "embedding":
        embed(write.fact, UNIT)
        embed(shared, CLOSE)
        embed(personal, UNIT)

    assert similar_statements(write.pk) == ["The office closes at five on Fridays"]
