"""The retrieval candidate read: one statement, eligibility in SQL, scope kept (R1, R2, R9, R14)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy
import pytest
from django.db import connection
from django.utils import timezone

from governance import prepared
from governance.models import Fact, Principal, Project
from governance.models.facts import vector_text
from governance.rules import contradictions
from governance.rules.policy import PolicySettings
from governance.selectors import retrievals as selectors
from governance.services import retrievals
from governance.services.retrievals import RetrieveRequest
from tests.personas import AgentPersona, FactFactory, PrincipalFactory, ProjectFactory

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


def test_only_the_history_part_reads_when_a_status_changed(project: Project, people: dict[str, Any]) -> None:
    # Thousands of a large principal's static and nearest rows would each bring a
    # timestamp to parse; only the history part is ordered by it.
    parts = ("static", "history", "nearest")
    params = {
        **selectors.standing_bounds(POLICY, people["now"]),
        "project": project.pk,
        "principal": people["alice"].pk,
        "session": None,
        "query": vector_text(unit(0)),
        "per_round_kinds": list(POLICY.per_round_kinds),
        "nearest_kinds": selectors._nearest_kinds(POLICY),
        "history_limit": selectors.INACTIVE_HISTORY_LIMIT,
        "nearest_limit": selectors._nearest_limit(POLICY),
    }
    with connection.cursor() as cursor:
        cursor.execute(selectors.candidate_statement(parts, "own_and_shared", True), params)
        rows = cursor.fetchall()
    changed = {(row[selectors._PART], row[selectors._CHANGED] is None) for row in rows}
    assert changed == {("static", True), ("nearest", True), ("history", False)}
    # As whole microseconds since 1970, not text to parse: exactly the stored time.
    stored = dict(Fact.objects.values_list("pk", "status_changed_at"))
    history = [row for row in rows if row[selectors._PART] == "history"]
    assert history and all(row[selectors._CHANGED].__class__ is int for row in history)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert [epoch + timedelta(microseconds=row[selectors._CHANGED]) for row in history] == [
        stored[row[selectors._ID]] for row in history
    ]


def test_the_history_part_of_a_principals_own_facts_names_the_principal_alone(
    project: Project, people: dict[str, Any]
) -> None:
    # Named with the project too, PostgreSQL multiplies the two columns' selectivities,
    # takes a large principal for a small one and sorts all its facts instead of walking
    # fact_principal_changed_idx (migration 0048): the text is what the plan depends on.
    from governance import rls

    history = selectors.candidate_statement(("history",), "own", False)
    assert "project_id" not in history and "f.principal_id = %(principal)s" in history
    # What it reads is still this principal's facts that do not stand, newest change first (R1, R14).
    other = ProjectFactory()
    elsewhere = PrincipalFactory(project=other, external_id="alice")
    FactFactory(project=other, principal=elsewhere, status="superseded", statement="Another Alice")
    params = {
        **selectors.standing_bounds(POLICY, people["now"]),
        "project": project.pk,
        "principal": people["alice"].pk,
        "history_limit": selectors.INACTIVE_HISTORY_LIMIT,
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [rls.SETTING, str(project.pk)])
        cursor.execute(history, params)
        ids = [row[selectors._ID] for row in cursor.fetchall()]
    facts = people["facts"]
    expected = [f for f in facts.values() if f.principal_id == people["alice"].pk]
    not_standing = {facts[name].pk for name in ("superseded", "low", "stale", "expired", "near_superseded")}
    assert set(ids) == not_standing
    changed = {f.pk: (f.status_changed_at, f.pk) for f in expected}
    assert ids == sorted(ids, key=changed.__getitem__, reverse=True)


def test_the_query_vector_reaches_the_database_with_the_values_its_field_would_send() -> None:
    # Nine digits per value (the float4 the column keeps) instead of the
    # shortest double-precision form: the database must read the same vector.
    rng = random.Random(13)
    single = numpy.array([rng.gauss(0, 1) for _ in range(DIM)], dtype=numpy.float32).tolist()
    double = [rng.gauss(0, 1) for _ in range(DIM)]
    tiny = numpy.array([rng.gauss(0, 1) * 1e-30 for _ in range(DIM)], dtype=numpy.float32).tolist()
    with connection.cursor() as cursor:
        for vector in (single, double, tiny, unit(3, -0.0)):
            sent = vector_text(vector)
            as_before = "[" + ",".join(map(str, map(float, vector))) + "]"
            cursor.execute("SELECT %s::vector::text, %s::vector::text", [sent, as_before])
            read, read_before = cursor.fetchone()
            assert read == read_before
    assert len(vector_text(single)) < len("[" + ",".join(map(str, single)) + "]")


def test_candidate_times_are_the_stored_times_to_the_microsecond(project: Project) -> None:
    # The read sends them as microseconds since 1970, not as text to parse.
    alice = cast(Principal, PrincipalFactory(project=project))
    now = timezone.now()
    fact = cast(
        Fact,
        FactFactory(
            project=project,
            principal=alice,
            valid_from=datetime(1969, 7, 20, 20, 17, 40, 123457, tzinfo=UTC),
            valid_to=now + timedelta(days=3, microseconds=7),
            source_observed_at=now - timedelta(days=2, microseconds=999_999),
        ),
    )
    stored = Fact.objects.get(pk=fact.pk)
    [found] = selectors.candidates(project, alice, None, POLICY, None, now=now, session_start=True)
    assert (found.valid_from, found.valid_to, found.last_verified_at) == (
        stored.valid_from,
        stored.valid_to,
        stored.last_verified_at,
    )
    assert found.valid_from is not None and found.valid_from.microsecond == 123457
    assert found.last_verified_at.tzinfo is stored.last_verified_at.tzinfo


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


def test_the_header_reads_principal_newest_verification_and_generation_in_one_statement(
    project: Project, people: dict[str, Any], django_assert_num_queries: Any
) -> None:
    alice = people["alice"]
    newest = timezone.now() - timedelta(hours=2)
    FactFactory(project=project, principal=alice, source_observed_at=newest)
    # Newer, but not active: it says nothing about when Alice was last heard from.
    FactFactory(project=project, principal=alice, status="rejected", source_observed_at=timezone.now())
    with django_assert_num_queries(1):
        header = selectors.retrieval_header(project, "alice")
    assert header.principal is not None and header.principal.pk == alice.pk
    assert header.newest_verified == newest and header.last_interaction == newest
    # The project's facts were written (people fixture): the generation has moved off 0.
    assert header.facts_generation > 0
    nobody = selectors.retrieval_header(project, "carol")
    assert nobody.principal is None and nobody.last_interaction is None
    assert nobody.facts_generation == header.facts_generation


def test_every_change_to_a_project_fact_moves_the_generation_and_no_other_does(
    project: Project, people: dict[str, Any]
) -> None:
    def generation() -> int:
        return selectors.retrieval_header(project, None).facts_generation

    seen = [generation()]
    fact = cast(Fact, FactFactory(project=project, kind="project_fact", statement="Office closes at 6"))
    seen.append(generation())
    Fact.objects.filter(pk=fact.pk).update(status="withdrawn")
    seen.append(generation())
    Fact.objects.filter(pk=fact.pk).update(authority=2)
    seen.append(generation())
    assert len(set(seen)) == len(seen), seen
    FactFactory(project=project, principal=people["alice"], statement="Alice likes tea")
    Fact.objects.filter(principal=people["alice"]).update(authority=3)
    assert generation() == seen[-1]


def test_a_rolled_back_change_leaves_no_generation_a_later_state_takes_again(project: Project) -> None:
    from django.db import transaction

    fact = cast(Fact, FactFactory(project=project, kind="project_fact", statement="Office closes at 6"))
    with transaction.atomic():
        Fact.objects.filter(pk=fact.pk).update(status="withdrawn")
        rolled_back = selectors.retrieval_header(project, None).facts_generation
        transaction.set_rollback(True)
    Fact.objects.filter(pk=fact.pk).update(authority=2)
    assert selectors.retrieval_header(project, None).facts_generation != rolled_back


@pytest.mark.parametrize("session_start", [True, False])
@pytest.mark.parametrize("who", ["alice", None])
def test_cached_project_facts_give_the_candidates_the_one_statement_gives(
    project: Project, people: dict[str, Any], session_start: bool, who: str | None
) -> None:
    now = people["now"]
    for n, (kind, status, axis) in enumerate(
        [
            ("project_fact", "active", 0),
            ("episodic", "active", 1),
            ("episodic", "active", 0),
            ("episodic", "superseded", 0),
            ("incident", "active", 3),
            ("episodic", "withdrawn", 2),
        ]
    ):
        FactFactory(
            project=project,
            kind=kind,
            status=status,
            statement=f"Project note {n}",
            embedding=unit(axis, 0.2 * n),
            authority=1 if n == 4 else 4,
        )
    FactFactory(project=project, kind="project_fact", statement="No vector yet")
    principal = people["alice"] if who else None
    generation = selectors.retrieval_header(project, who).facts_generation
    for query in (unit(0, 0.3), None):
        plain = selectors.candidates(
            project, principal, None, POLICY, query, now=now, session_start=session_start
        )
        cached = selectors.candidates(
            project,
            principal,
            None,
            POLICY,
            query,
            now=now,
            session_start=session_start,
            facts_generation=generation,
        )
        assert [c.fact_id for c in cached] == [c.fact_id for c in plain]
        for a, b in zip(cached, plain, strict=True):
            assert a.relevance == pytest.approx(b.relevance, abs=1e-6)
            assert a == replace(b, relevance=a.relevance)


def test_the_cache_reads_the_project_facts_once_per_generation(
    project: Project, people: dict[str, Any], django_assert_num_queries: Any
) -> None:
    alice, now = people["alice"], people["now"]
    generation = selectors.retrieval_header(project, "alice").facts_generation
    with django_assert_num_queries(2):  # the project's facts, then the principal's rows
        selectors.candidates(
            project, alice, None, POLICY, unit(0), now=now, session_start=True, facts_generation=generation
        )
    with django_assert_num_queries(1):
        selectors.candidates(
            project, alice, None, POLICY, unit(0), now=now, session_start=True, facts_generation=generation
        )
    with django_assert_num_queries(0):  # nobody named: project memory only, all of it cached
        selectors.candidates(
            project, None, None, POLICY, unit(0), now=now, session_start=True, facts_generation=generation
        )


def test_project_facts_read_under_a_narrower_scope_are_not_kept(
    project: Project, people: dict[str, Any]
) -> None:
    from governance import rls

    generation = selectors.retrieval_header(project, None).facts_generation
    # Row-level security may hide rows from such a read: nobody else may be handed them.
    with rls.scope(rls.projects([project.pk + 1000])):
        selectors.project_facts(project.pk, generation)
    assert (project.pk, generation) not in selectors._project_facts
    with rls.scope(rls.projects([project.pk])):
        kept = selectors.project_facts(project.pk, generation)
    assert selectors._project_facts[(project.pk, generation)] is kept
    assert [row[0] for row in kept.rows] == [people["facts"]["project"].pk]


@pytest.mark.parametrize(
    "policy", [POLICY, PolicySettings(min_authority=1, confirm_days=1, allowed_kinds=("profile", "episodic"))]
)
def test_the_read_filters_with_the_standing_rule_itself(project: Project, policy: PolicySettings) -> None:
    """The SQL the candidate read narrows with decides every stored fact as ``stands`` does."""
    now = timezone.now()
    hour = timedelta(hours=1)
    for n, (status, kind, authority, valid_from, valid_to, days) in enumerate(
        [
            ("active", "profile", 4, None, None, 1),
            ("superseded", "profile", 4, None, None, 1),
            ("active", "incident", 4, None, None, 1),
            ("active", "profile", 2, None, None, 1),
            ("active", "profile", 1, None, None, 1),
            ("active", "profile", 4, now + hour, None, 1),
            ("active", "profile", 4, now - hour, now - hour / 2, 1),
            ("active", "profile", 4, now - hour, now + hour, 1),
            ("active", "episodic", 4, None, None, 1.9),
            ("active", "episodic", 4, None, None, 2.1),
            ("active", "episodic", 4, None, None, 30.9),
            ("active", "episodic", 4, None, None, 31.1),
            ("withdrawn", "episodic", 5, None, None, 0),
        ]
    ):
        FactFactory(
            project=project,
            kind=kind,
            status=status,
            authority=authority,
            valid_from=valid_from,
            valid_to=valid_to,
            source_observed_at=now - timedelta(days=days),
            statement=f"Standing case {n}",
        )
    columns = ", ".join(f"f.{name}" for name in selectors.ROW_FIELDS[: selectors._DISTANCE])
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns}, NULL, NULL, {selectors.STANDING_SQL} FROM governance_fact f "
            "WHERE f.project_id = %(project)s ORDER BY f.id",
            {**selectors.standing_bounds(policy, now), "project": project.pk},
        )
        rows = cursor.fetchall()
    bounds = selectors.standing_bounds(policy, now)
    decided = [(row[0], row[-1]) for row in rows]
    assert decided == [(row[0], selectors.stands(row, selectors.POSITIONS, bounds)) for row in rows]
    assert {standing for _, standing in decided} == {True, False}


def test_the_written_out_read_runs_under_the_project_scope(project: Project, people: dict[str, Any]) -> None:
    """Row-level security scopes the raw candidate statement like any other read of facts."""
    from governance import rls

    alice, now = people["alice"], people["now"]

    def read() -> set[int]:
        found = selectors.candidates(project, alice, None, POLICY, unit(0), now=now, session_start=True)
        return {c.fact_id for c in found}

    with rls.scope(rls.projects([project.pk])):
        assert people["facts"]["profile"].pk in read()
    with rls.scope(rls.projects([project.pk + 1000])):
        assert read() == set()


def test_the_header_reads_the_rulings_on_the_principals_and_the_projects_pairs(
    project: Project, people: dict[str, Any]
) -> None:
    from governance.models import Write
    from governance.models.writes import ReviewDecision
    from governance.services import conflicts
    from tests.personas import make_user

    alice, bob = people["alice"], people["bob"]

    def pair(principal: Any, n: int) -> tuple[Fact, Fact]:
        older, newer = (
            cast(Fact, FactFactory(project=project, principal=principal, statement=f"Pair {n} part {part}"))
            for part in (1, 2)
        )
        return older, newer

    flagged = {}
    cases = (("alice", alice, 1), ("bob", bob, 2), ("project", None, 3), ("kept", alice, 4))
    for name, principal, n in cases:
        older, newer = pair(principal, n)
        write = conflicts.flag_possible_conflict(newer, older, detail="Test pair.", found_by="test")
        assert write is not None
        flagged[name] = (write, frozenset((older.pk, newer.pk)))
    kept_write = flagged["kept"][0]
    ReviewDecision.objects.create(
        write=kept_write, reviewer=make_user("reviewer", None), action="keep_both", reason="Both hold."
    )
    Write.objects.filter(pk=kept_write.pk).update(status="active")

    header = selectors.retrieval_header(project, "alice")
    assert header.rulings == selectors.conflict_rulings(project.pk, alice.pk)
    assert header.rulings.waiting == {flagged["alice"][1], flagged["project"][1]}
    assert header.rulings.kept == {flagged["kept"][1]}
    # Nobody named, or nobody known yet: the project's pairs only (R1).
    for external_id in (None, "carol"):
        assert selectors.retrieval_header(project, external_id).rulings.waiting == {flagged["project"][1]}


def test_a_policy_without_per_round_kinds_reads_them_all_as_static_memory(
    project: Project, people: dict[str, Any]
) -> None:
    facts, now = people["facts"], people["now"]
    policy = PolicySettings(per_round_kinds=())
    found = selectors.candidates(project, people["alice"], None, policy, unit(0), now=now, session_start=True)
    static = [c.fact_id for c in found if c.status == "active" and c.authority >= policy.min_authority]
    # No nearest part: the episodic facts come once, as static memory, in id order.
    for name in ("profile", "project", "near", "far"):
        assert facts[name].pk in static, name
    assert len(found) == len({c.fact_id for c in found})


def test_the_header_says_whether_the_principal_has_few_enough_facts_for_one_plan(project: Project) -> None:
    limit = selectors.PREPARED_CANDIDATES_UP_TO
    dora = PrincipalFactory(project=project, external_id="dora")
    Fact.objects.bulk_create(
        FactFactory.build(project=project, principal=dora, statement=f"Dora note {n}") for n in range(limit)
    )
    assert selectors.retrieval_header(project, "dora").few_facts
    FactFactory(project=project, principal=dora, status="superseded", statement="one more, of any status")
    assert not selectors.retrieval_header(project, "dora").few_facts
    # Nobody of that name yet: nothing to read.
    assert selectors.retrieval_header(project, "erin").few_facts


def test_the_candidate_read_gives_the_same_rows_prepared_or_planned_for_its_values(
    project: Project, people: dict[str, Any]
) -> None:
    from django.test.utils import CaptureQueriesContext

    alice, now = people["alice"], people["now"]
    found: dict[bool, list[list[Any]]] = {}
    for plan_once in (False, True, True):
        with CaptureQueriesContext(connection) as seen:
            read = selectors.candidates(
                project, alice, None, POLICY, unit(0), now=now, session_start=True, plan_once=plan_once
            )
        (sql,) = [q["sql"] for q in seen.captured_queries]
        assert ("EXECUTE governance_prepared_" in sql) == plan_once, sql
        found.setdefault(plan_once, []).append(read)
    assert found[False][0] == found[True][0] == found[True][1]
    assert {c.fact_id for c in found[True][0]} >= {people["facts"]["profile"].pk, people["facts"]["near"].pk}


def test_every_candidate_carries_the_claims_its_fact_keeps(
    project: Project, people: dict[str, Any], support_bot: AgentPersona
) -> None:
    # Stored as a write stores them (these facts were stored directly, without).
    for pk, statement, key in Fact.objects.values_list("pk", "statement", "key"):
        Fact.objects.filter(pk=pk).update(claims=contradictions.stored_claims(statement, key))
    kept = dict(Fact.objects.values_list("pk", "claims"))
    alice, now, facts = people["alice"], people["now"], people["facts"]
    generation = selectors.retrieval_header(project, "alice").facts_generation
    for cached in (None, generation):
        found = selectors.candidates(
            project, alice, None, POLICY, unit(0), now=now, session_start=True, facts_generation=cached
        )
        # Static, history and nearest parts, the project's facts among them.
        assert {facts[name].pk for name in ("profile", "project", "superseded", "near")} <= {
            c.fact_id for c in found
        }
        assert {c.fact_id: c.stored_claims for c in found} == {c.fact_id: kept[c.fact_id] for c in found}
    # A later round's cached start block brings its facts with theirs.
    agent = support_bot.agent
    assert agent.active_policy is not None
    retrievals.retrieve(agent, RetrieveRequest("alice", "s-1", "", 1, True))
    header = selectors.retrieval_header(
        project, "alice", agent=agent, session="s-1", block_key=(True, agent.active_policy)
    )
    assert header.block is not None
    in_block = header.block[1]
    assert in_block and {c.fact_id: c.stored_claims for c in in_block} == {
        c.fact_id: kept[c.fact_id] for c in in_block
    }


@pytest.mark.parametrize("query", [unit(0, 0.05), None], ids=["query", "no query"])
def test_a_later_rounds_header_reads_the_candidates_its_own_read_would(
    project: Project,
    people: dict[str, Any],
    support_bot: AgentPersona,
    django_assert_num_queries: Any,
    query: list[float] | None,
) -> None:
    # A later round that reuses its block reads its principal's nearest facts
    # and its session's slots in the header: the same candidates, in the same
    # order, as the candidate read it no longer sends (issue 13).
    from governance.models import Session

    agent = support_bot.agent
    version = agent.active_policy
    assert version is not None
    policy, now, alice, facts = version.policy, people["now"], people["alice"], people["facts"]
    retrievals.retrieve(agent, RetrieveRequest("alice", "s-1", "", 1, True))
    session = Session.objects.get(agent=agent, external_id="s-1")
    FactFactory(project=project, principal=alice, session=session, kind="slot", embedding=unit(0, 0.2))
    FactFactory(project=project, principal=alice, session=session, kind="slot", key="draft")
    # A vector of zeros has no direction: pgvector's distance to it is NaN, which JSON sends as text.
    FactFactory(project=project, principal=alice, kind="episodic", embedding=[0.0] * DIM)
    # Another session's slot and another person's facts are never read (R1).
    other = Session.objects.create(project=project, agent=agent, principal=alice, external_id="s-2")
    FactFactory(project=project, principal=alice, session=other, kind="slot", statement="Elsewhere")
    header = selectors.retrieval_header(
        project,
        "alice",
        agent=agent,
        session="s-1",
        block_key=(True, version),
        later_round=(policy, query, now),
    )
    assert header.later_rows is not None and header.session is not None
    with django_assert_num_queries(0):
        read_ahead = selectors.candidates(
            project,
            header.principal,
            header.session,
            policy,
            query,
            now=now,
            session_start=False,
            facts_generation=header.facts_generation,
            later_rows=header.later_rows,
        )
    own_read = selectors.candidates(
        project,
        alice,
        session,
        policy,
        query,
        now=now,
        session_start=False,
        facts_generation=header.facts_generation,
    )
    assert read_ahead == own_read
    ids = {c.fact_id for c in read_ahead}
    slots = set(Fact.objects.filter(session=session).values_list("pk", flat=True))
    assert slots <= ids and not ids & set(Fact.objects.filter(session=other).values_list("pk", flat=True))
    assert facts["bob"].pk not in ids and facts["near_superseded"].pk not in ids
    assert (facts["near"].pk in ids) is (query is not None)


def test_a_later_round_of_a_principal_with_many_facts_reads_its_candidates_itself(
    project: Project, support_bot: AgentPersona
) -> None:
    # Their parts are planned for their values (``few_facts``), not read by the prepared header.
    agent = support_bot.agent
    assert agent.active_policy is not None
    dora = PrincipalFactory(project=project, external_id="dora")
    Fact.objects.bulk_create(
        FactFactory.build(project=project, principal=dora, statement=f"Dora note {n}")
        for n in range(selectors.PREPARED_CANDIDATES_UP_TO + 1)
    )
    retrievals.retrieve(agent, RetrieveRequest("dora", "s-1", "", 1, True))
    header = selectors.retrieval_header(
        project,
        "dora",
        agent=agent,
        session="s-1",
        block_key=(True, agent.active_policy),
        later_round=(agent.active_policy.policy, unit(0), timezone.now()),
    )
    assert header.block is not None and header.block[0] is not None
    assert not header.few_facts and header.later_rows is None


def _subplan_loops(node: dict[str, Any], relation: str) -> list[int]:
    """How often each sub-select under the scan of ``relation`` in a JSON plan ran."""
    if node.get("Relation Name") == relation:
        return [p["Actual Loops"] for p in node.get("Plans", []) if p.get("Parent Relationship") == "SubPlan"]
    return [n for child in node.get("Plans", []) for n in _subplan_loops(child, relation)]


def test_a_later_rounds_header_builds_the_facts_of_its_own_block_only(
    project: Project, people: dict[str, Any], support_bot: AgentPersona, settings: Any
) -> None:
    # With the block's sub-select pulled up into the header's join, a generic plan
    # made while session blocks were few scanned them all and built each one's facts
    # before the join kept the session's (issue 13: after make bench's seed, 2.2 ms a
    # header where 0.8 ms with its block kept to its key).
    agent = support_bot.agent
    version = agent.active_policy
    assert version is not None
    for n in range(5):
        retrievals.retrieve(agent, RetrieveRequest("alice", f"s-{n}", "", 1, True))
        retrievals.retrieve(agent, RetrieveRequest("bob", f"b-{n}", "", 1, True))
    # The header's values, as retrieval_header passes them.
    settings.DATABASE_PREPARED_STATEMENTS = False
    sent: list[Any] = []

    def keep(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append(params)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        header = selectors.retrieval_header(
            project,
            "alice",
            agent=agent,
            session="s-3",
            block_key=(True, version),
            later_round=(version.policy, unit(0), people["now"]),
        )
    assert header.block is not None and header.block[0] is not None
    statement = prepared.compile_statement(
        selectors.header_statement(True, False, True, selectors.later_round_parts(version.policy, True), True)
    )
    (params,) = sent  # the header is one statement
    values = statement.values(params)
    with connection.cursor() as cursor:
        # The plan PostgreSQL keeps after five uses, made for no value in particular, reading
        # the blocks in full, as it does where it believes the table nearly empty. Prepared
        # under a name of its own, so the header's own prepared statement keeps its plans.
        for setting in (
            "plan_cache_mode = force_generic_plan",
            "enable_indexscan = off",
            "enable_bitmapscan = off",
        ):
            cursor.execute(f"SET LOCAL {setting}")
        cursor.execute("SELECT set_config('memoryadmin.projects', 'all', true)")
        cursor.execute("PREPARE block_probe AS " + statement.text)
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE block_probe(" + ", ".join(["%s"] * len(values)) + ")",
            values,
        )
        (plan,) = cursor.fetchone()
        cursor.execute("DEALLOCATE block_probe")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    assert _subplan_loops(plan[0]["Plan"], "governance_sessionblock") == [1], plan
