"""``manage.py store_fact_claims`` stores the claims older facts lack, leaves erased ones without."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from governance.models import Fact, Project
from governance.rules import contradictions
from governance.services import facts as fact_service
from tests.personas import FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db


def current(fact: Fact) -> bool:
    fact.refresh_from_db()
    return contradictions.holds_claims_of(fact.claims, fact.statement, fact.key)


def test_the_command_stores_missing_and_outdated_claims_and_then_has_nothing_to_do(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = PrincipalFactory(project=project, external_id="alice")
    # Written before facts kept their claims; by an older reader; and up to date.
    before = [
        FactFactory.create(project=project, principal=alice, statement=f"I live in City{n}.")
        for n in range(5)
    ]
    older = FactFactory.create(project=project, principal=alice, statement="Rust", key="primary_language")
    monkeypatch.setattr(contradictions, "CLAIMS_VERSION", contradictions.CLAIMS_VERSION - 1)
    Fact.objects.filter(pk=older.pk).update(claims=contradictions.stored_claims(older.statement, older.key))
    monkeypatch.undo()
    fresh = FactFactory.create(project=project, kind="project_fact", statement="We deploy to eu-west-2.")
    Fact.objects.filter(pk=fresh.pk).update(claims=contradictions.stored_claims(fresh.statement, None))
    erased = FactFactory.create(project=project, principal=alice, status="withdrawn", statement="")
    assert not any(current(f) for f in (*before, older))
    out = StringIO()

    call_command("store_fact_claims", "--batch-size", "2", stdout=out)

    assert "Stored the claims of 6 fact(s); 1 already had this reader's." in out.getvalue()
    assert all(current(f) for f in (*before, older, fresh))
    (city,) = contradictions.claims_from_store(before[0].claims, before[0].statement, None)
    assert (city.attribute, city.values) == ("city", frozenset({"city0"}))
    erased.refresh_from_db()
    assert erased.claims is None  # nothing to store, and nothing of what it said kept (R8)
    again = StringIO()
    call_command("store_fact_claims", stdout=again)
    assert "Stored the claims of 0 fact(s); 7 already had this reader's." in again.getvalue()


def test_a_statement_changed_while_its_claims_were_read_keeps_what_its_change_stored(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = FactFactory.create(project=project, statement="I live in Leeds.")
    read = contradictions.stored_claims

    def erased_meanwhile(statement: str, key: str | None) -> Any:
        # A withdrawal between the batch's read and its update blanks the statement.
        Fact.objects.filter(pk=fact.pk).update(statement="", claims=None)
        return read(statement, key)

    monkeypatch.setattr(contradictions, "stored_claims", erased_meanwhile)

    done = fact_service.store_claims()

    fact.refresh_from_db()
    assert (fact.statement, fact.claims) == ("", None)
    assert done.stored == 0
