"""services.retrievals as such: retrieve() and record_feedback(), without the API in between.

The API's tests (api/test_retrieve.py, api/test_feedback.py) check the answer agents
get; these check what one retrieval records and what it refuses.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import Fact, RetrievalEvent, RetrievalFeedback, Session
from governance.rules import contradictions
from governance.services import retrievals, sessions
from governance.services.retrievals import RetrieveRequest
from governance.services.sessions import SessionError
from tests.helpers import candidate
from tests.personas import AgentPersona, FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db


def ask(
    bot: AgentPersona, session: str | None = "s-1", *, round: int = 1, identity_verified: bool = True
) -> tuple[RetrievalEvent, retrievals.Retrieval]:
    return retrievals.retrieve(
        bot.agent,
        RetrieveRequest(
            principal="alice", session=session, query="", round=round, identity_verified=identity_verified
        ),
    )


@pytest.fixture
def remembered(support_bot: AgentPersona, config_bot: AgentPersona) -> dict[str, int]:
    return {
        "city": support_bot.write("Lives in Leeds", key="home_city")["fact"]["id"],
        "office": config_bot.write(
            "The office closes at 6pm", principal=None, kind="project_fact", source="config"
        )["fact"]["id"],
        "bob": support_bot.write("Lives in York", principal="bob", key="home_city")["fact"]["id"],
    }


def test_one_event_records_a_decision_for_every_candidate_and_the_context_it_sent(support_bot, remembered):
    event, result = ask(support_bot)

    assert RetrievalEvent.objects.get() == event
    decisions = {c.fact_id: c.decision for c in event.candidates}
    # Bob's fact is never a candidate for Alice; hers and the project's are selected.
    assert decisions == {remembered["city"]: "selected", remembered["office"]: "selected"}
    assert "Lives in Leeds" in event.context and "office closes" in event.context
    assert "York" not in event.context
    assert {item.fact_id for item in result.selected} == {remembered["city"], remembered["office"]}
    assert event.session is not None and event.session == Session.objects.get(external_id="s-1")


def test_an_unverified_identity_gets_project_facts_only(support_bot, remembered):
    event, _ = ask(support_bot, identity_verified=False)

    assert "office closes" in event.context
    assert "Leeds" not in event.context
    selected = {c.fact_id for c in event.candidates if c.decision == "selected"}
    assert selected == {remembered["office"]}


def test_a_later_round_reuses_the_session_start_block(support_bot, remembered):
    _, first_result = ask(support_bot)
    later, later_result = ask(support_bot, round=2)

    assert first_result.cached is False and later_result.cached is True
    assert "Lives in Leeds" in later.context
    assert RetrievalEvent.objects.count() == 2


def test_a_later_round_that_opens_its_session_gives_it_the_mode_of_a_first_round(support_bot, remembered):
    # A later round's first statement leaves out R9's newest verification (a
    # reused block needs no mode); a session such a round opens still gets it:
    # Alice was never seen, but her fact was verified just now, so she resumes.
    event, result = ask(support_bot, "s-late", round=2)

    assert result.cached is False
    assert Session.objects.get(external_id="s-late").mode == "resume" == event.mode
    assert "Lives in Leeds" in event.context


def test_feedback_names_only_what_the_retrieval_gave_and_is_stored_once(support_bot, remembered):
    event, _ = ask(support_bot)

    with pytest.raises(retrievals.FeedbackError) as stray:
        retrievals.record_feedback(support_bot.agent, event, used=[remembered["bob"]], wrong=[])
    assert stray.value.field == "used"
    assert not RetrievalFeedback.objects.exists()

    feedback = retrievals.record_feedback(
        support_bot.agent, event, used=[remembered["city"]], wrong=[remembered["office"]]
    )
    assert (feedback.used, feedback.wrong) == ([remembered["city"]], [remembered["office"]])
    with pytest.raises(retrievals.FeedbackError) as twice:
        retrievals.record_feedback(support_bot.agent, event, used=[], wrong=[])
    assert twice.value.conflict is True


def test_a_withdrawn_or_superseded_project_fact_is_never_served_from_the_cache(
    support_bot, config_bot, remembered
):
    from governance.models import Fact
    from governance.services import facts as fact_service

    def served(session: str, principal: str | None) -> set[int]:
        _event, result = retrievals.retrieve(
            support_bot.agent,
            RetrieveRequest(principal=principal, session=session, query="", round=1, identity_verified=True),
        )
        return {item.fact_id for item in result.selected}

    hours = config_bot.write(
        "Support hours are 9 to 5", principal=None, kind="project_fact", key="support_hours", source="config"
    )["fact"]["id"]
    # Both the person's retrieval and a project-only one have the project's facts cached now.
    assert {remembered["office"], hours} <= served("warm-1", "alice")
    assert {remembered["office"], hours} <= served("warm-2", None)

    fact_service.withdraw_fact(Fact.objects.get(pk=remembered["office"]), reason="closed", actor="user:x")
    assert remembered["office"] not in served("after-1", "alice")
    assert remembered["office"] not in served("after-2", None)

    newer = config_bot.write(
        "Support hours are 8 to 4", principal=None, kind="project_fact", key="support_hours", source="config"
    )["fact"]["id"]
    assert Fact.objects.get(pk=hours).status == "superseded"
    for session, principal in (("after-3", "alice"), ("after-4", None)):
        selected = served(session, principal)
        assert hours not in selected and newer in selected


@pytest.fixture
def new_process() -> Iterator[None]:
    """A process that has read no stored claims yet (after a restart, or another web process)."""
    contradictions._trusted_claims.cache_clear()
    yield
    # What the test's stand-in reader found must not outlive it.
    contradictions.claims_of.cache_clear()
    contradictions._trusted_claims.cache_clear()


def two_cities(bot: AgentPersona) -> tuple[Fact, Fact]:
    """Two active facts about where Alice lives, stored as a write stores them (claims
    included), and with no review waiting on the pair: only their words can tell
    that the older one is out of date."""
    alice = PrincipalFactory(project=bot.agent.project, external_id="alice")

    def fact(statement: str, days: int) -> Fact:
        observed = timezone.now() - timedelta(days=days)
        return FactFactory.create(
            project=bot.agent.project,
            principal=alice,
            kind="profile",
            statement=statement,
            source_observed_at=observed,
            claims=contradictions.stored_claims(statement, None),
        )

    facts = fact("I live in Leeds.", 3), fact("I live in York now.", 1)
    # Then the retrieval runs in a process that has read neither statement.
    contradictions.claims_of.cache_clear()
    return facts


def test_a_first_round_decides_contradictions_by_the_claims_stored_with_the_facts(
    support_bot, new_process, monkeypatch
):
    leeds, _york = two_cities(support_bot)
    # A reader that finds nothing: only the stored claims can tell the two apart.
    monkeypatch.setattr(contradictions, "_clause_claims", lambda clause: [])

    event, _ = ask(support_bot)

    assert "York" in event.context and "Leeds" not in event.context
    assert candidate(event.pk, leeds.pk).reason == "conflict_lost"


def test_a_statement_changed_without_its_claims_is_compared_by_its_new_words(support_bot, new_process):
    leeds, york = two_cities(support_bot)
    # Changed where the claims were not stored again (an UPDATE by hand, a restored row).
    Fact.objects.filter(pk=york.pk).update(statement="I enjoy walks around York now.")

    event, _ = ask(support_bot)

    assert "Leeds" in event.context and "walks around York" in event.context
    assert candidate(event.pk, leeds.pk).decision == "selected"


def test_a_first_rounds_new_session_is_stored_with_its_candidate_read(support_bot, remembered):
    # One statement inserts the session (bound to its person, with R9's mode)
    # and reads the candidates (docs/performance.md, "Statements per retrieval").
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        event, _ = ask(support_bot, "s-new")
    session = Session.objects.get(external_id="s-new")
    assert session.principal is not None
    assert (session.principal.external_id, session.mode, event.session_id) == ("alice", "resume", session.pk)

    def alone(captured: CaptureQueriesContext) -> list[str]:
        # The statements that insert a session and read no facts (a read
        # prepared before shows only its EXECUTE, so it is not looked for).
        return [
            q["sql"]
            for q in captured
            if 'INSERT INTO "governance_session"' in q["sql"] and "governance_fact" not in q["sql"]
        ]

    assert alone(captured) == []
    # Project memory only: no fact of a person's to read, and the process has
    # the project's facts, so the session is inserted by a statement of its own.
    with CaptureQueriesContext(connection) as captured:
        event, _ = retrievals.retrieve(support_bot.agent, RetrieveRequest(None, "s-project", "", 1, True))
    assert len(alone(captured)) == 1
    assert Session.objects.get(external_id="s-project").principal is None
    assert event.session_id == Session.objects.get(external_id="s-project").pk


def test_a_first_round_whose_new_session_another_round_stored_first_uses_theirs(
    support_bot, remembered, monkeypatch
):
    # The other round committed between this one's header (no such session)
    # and its INSERT: this one waits for it, then reads it locked, with its
    # slots, and keeps the rules of a session it found.
    from governance.models import Principal
    from governance.selectors import retrievals as selectors

    alice = Principal.objects.get(external_id="alice")
    theirs = Session.objects.create(
        project=support_bot.agent.project, agent=support_bot.agent, principal=alice, external_id="s-race"
    )
    slot = support_bot.write("Wants a window seat", kind="slot", session="s-race")["fact"]["id"]
    header = selectors.retrieval_header

    def before_the_other_round(*args, **kwargs):
        found = header(*args, **kwargs)
        return found.__class__(**{**found.__dict__, "session": None})

    monkeypatch.setattr(selectors, "retrieval_header", before_the_other_round)
    event, result = ask(support_bot, "s-race")
    assert event.session_id == theirs.pk
    assert Session.objects.filter(external_id="s-race").count() == 1
    assert slot in {item.fact_id for item in result.selected}
    # Bound to another person, the session is refused as if found.
    bob = Principal.objects.get(external_id="bob")
    Session.objects.create(
        project=support_bot.agent.project, agent=support_bot.agent, principal=bob, external_id="s-bob"
    )
    events = RetrievalEvent.objects.count()
    with pytest.raises(SessionError):
        ask(support_bot, "s-bob")
    assert RetrievalEvent.objects.count() == events


@pytest.mark.django_db(transaction=True)
def test_two_first_rounds_of_one_new_session_share_it(support_bot, monkeypatch):
    # Neither header finds the session; the first to insert it holds its
    # transaction open, the other's INSERT waits for it, finds it taken, and
    # goes on with the session the first stored (not a second one, not an error).
    import threading
    import time

    from django.db import connection

    support_bot.write("Lives in Leeds", key="home_city")
    real_record, real_open = retrievals._record, sessions.open_session
    held = threading.Event()
    fallbacks: list[str] = []

    def slow_record(*args, **kwargs):
        if not held.is_set():
            held.set()
            time.sleep(1.0)
        return real_record(*args, **kwargs)

    def counted_open(agent, external_id, principal, **kwargs):
        if not kwargs.get("looked_up"):
            fallbacks.append(external_id)
        return real_open(agent, external_id, principal, **kwargs)

    monkeypatch.setattr(retrievals, "_record", slow_record)
    monkeypatch.setattr(sessions, "open_session", counted_open)
    barrier = threading.Barrier(2)
    events: list[int] = []
    errors: list[BaseException] = []

    def first_round() -> None:
        barrier.wait()
        try:
            event, _ = ask(support_bot, "s-both")
            events.append(event.pk)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first_round) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == [] and len(events) == 2
    [session] = Session.objects.filter(external_id="s-both")
    used = RetrievalEvent.objects.filter(pk__in=events).values_list("session_id", flat=True)
    assert set(used) == {session.pk}
    assert fallbacks == ["s-both"]
