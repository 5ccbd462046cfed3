"""A database lost at any moment of a request answers 503 with Retry-After, never 500.

A PostgreSQL restart ends every session wherever its request happens to be:
before the view, in the middle of its transaction, after the commit. Each
test here sends a request once for each statement it makes, ending the
request's database session (``pg_terminate_backend``) just before that
statement, and checks every answer: the request's own success, or the 503
an agent retries after (the API's error shape, code ``unavailable``) or a
person reads (a plain page). The soak test (tests/bench/test_soak.py)
restarts a real server under load; this finds each moment every time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test import Client

from governance.api.errors import DATABASE_RETRY_AFTER_SECONDS
from governance.models import Write
from tests.governance.database_helpers import connection_params, end_session
from tests.governance.review_helpers import PENDING, propose
from tests.personas import PASSWORD, AgentPersona, retrieve_body, token_client, write_body

# Every session ended needs committed rows to come back to, and a second connection to end it from.
pytestmark = pytest.mark.django_db(transaction=True)

RETRY_AFTER = str(DATABASE_RETRY_AFTER_SECONDS)
CONSOLE_UNAVAILABLE = "cannot reach its database"


@contextmanager
def session_ended_before(statement: int) -> Iterator[list[str]]:
    """Ends the database session just before the ``statement``-th statement (from 1); yields those seen."""
    seen: list[str] = []

    def end_it_first(execute: Any, sql: Any, params: Any, many: bool, context: dict[str, Any]) -> Any:
        seen.append(str(sql))
        if len(seen) == statement:
            end_session(context["connection"].connection.info.backend_pid)
        return execute(sql, params, many, context)

    connection.ensure_connection()
    # Outermost, ahead of governance.rls's wrapper: the session is already
    # gone when that one sets the transaction's projects.
    connection.execute_wrappers.insert(0, end_it_first)
    try:
        yield seen
    finally:
        connection.execute_wrappers.remove(end_it_first)
        # What Django does when a request ends (the test client leaves it out).
        connection.close()


def answers_with_each_statement_lost(
    send: Callable[[Any], Any], prepare: Callable[[], Any] = lambda: None
) -> list[tuple[str, Any]]:
    """(statement, answer) for each statement the request makes, its session ended just before it."""
    answers: list[tuple[str, Any]] = []
    statement = 1
    while True:
        prepared = prepare()
        with session_ended_before(statement) as seen:
            response = send(prepared)
        if len(seen) < statement:
            # Fewer statements than that: the request has lost each one in turn.
            assert response.status_code < 400, response.content[:300]
            return answers
        answers.append((seen[statement - 1], response))
        statement += 1


def api_unavailable(response: Any) -> bool:
    return (
        response.status_code == 503
        and response.get("Retry-After") == RETRY_AFTER
        and response.json()["error"]["code"] == "unavailable"
    )


def console_unavailable(response: Any) -> bool:
    return (
        response.status_code == 503
        and response.get("Retry-After") == RETRY_AFTER
        and CONSOLE_UNAVAILABLE in response.content.decode()
    )


def wrong_answers(
    answers: list[tuple[str, Any]], success: set[int], unavailable: Callable[[Any], bool]
) -> list[tuple[str, int, bytes]]:
    assert any(unavailable(response) for _, response in answers), "no statement was lost"
    return [
        (statement[:90], response.status_code, response.content[:200])
        for statement, response in answers
        if response.status_code not in success and not unavailable(response)
    ]


@pytest.fixture
def agent_client(support_bot: AgentPersona) -> Any:
    client = support_bot.client
    # The answer Django would send, not the exception behind it.
    client.raise_request_exception = False
    return client


@pytest.fixture
def reviewer_client(reviewer: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(reviewer)
    return client


def test_an_agents_write_answers_503_whichever_statement_loses_the_database(agent_client: Any) -> None:
    body = write_body("Prefers tea.")  # once: a retry sends the same body, observed_at included
    answers = answers_with_each_statement_lost(
        lambda _: agent_client.post("/api/v1/writes", body, format="json", HTTP_IDEMPOTENCY_KEY="tea")
    )

    assert wrong_answers(answers, {201}, api_unavailable) == []
    # The one write, however many times it was sent: the key made each retry safe.
    assert Write.objects.filter(idempotency_key="tea").count() == 1


def test_a_retrieval_answers_503_whichever_statement_loses_the_database(agent_client: Any) -> None:
    answers = answers_with_each_statement_lost(
        lambda _: agent_client.post("/api/v1/retrieve", retrieve_body("s-1"), format="json")
    )

    assert wrong_answers(answers, {200}, api_unavailable) == []


def test_a_console_page_answers_a_plain_503_whichever_statement_loses_the_database(
    reviewer_client: Client,
) -> None:
    answers = answers_with_each_statement_lost(lambda _: reviewer_client.get("/reviews/"))

    assert wrong_answers(answers, {200}, console_unavailable) == []


def test_a_review_decision_answers_a_plain_503_whichever_statement_loses_the_database(
    reviewer_client: Client, support_bot: AgentPersona
) -> None:
    answers = answers_with_each_statement_lost(
        lambda write: reviewer_client.post(
            f"/reviews/{write.pk}/decide", {"action": "approve", "reason": "Confirmed by phone"}
        ),
        prepare=lambda: propose(support_bot, PENDING + f" {Write.objects.count()}"),
    )

    assert wrong_answers(answers, {302}, console_unavailable) == []


def streamed_whole(response: Any) -> Any:
    """The response, its streamed body read to the end inside the request's statements."""
    if response.streaming:
        response.whole = b"".join(response.streaming_content)
    return response


def test_the_audit_export_answers_503_whichever_statement_loses_the_database(
    auditor: User, support_bot: AgentPersona
) -> None:
    # Before any row is sent: a 503 to try again, not a 500 or a 200 with an empty file.
    propose(support_bot, "Prefers tea.")
    api = token_client(auditor)
    api.raise_request_exception = False
    console = Client(raise_request_exception=False)
    console.force_login(auditor)

    api_answers = answers_with_each_statement_lost(
        lambda _: streamed_whole(api.get("/api/v1/admin/audit/export", {"format": "jsonl"}))
    )
    console_answers = answers_with_each_statement_lost(
        lambda _: streamed_whole(console.get("/history/export", {"format": "csv"}))
    )

    assert wrong_answers(api_answers, {200}, api_unavailable) == []
    assert wrong_answers(console_answers, {200}, console_unavailable) == []
    # What a successful answer carried once the database was back: the whole history.
    complete = streamed_whole(api.get("/api/v1/admin/audit/export", {"format": "jsonl"}))
    assert b'"action":"write.' in complete.whole


def test_signing_in_answers_a_plain_503_whichever_statement_loses_the_database(reviewer: User) -> None:
    client = Client(raise_request_exception=False)
    answers = answers_with_each_statement_lost(
        lambda _: client.post("/login/", {"username": reviewer.username, "password": PASSWORD})
    )

    assert wrong_answers(answers, {302}, console_unavailable) == []


def test_a_session_ended_elsewhere_while_signing_in_answers_the_plain_400_page(reviewer: User) -> None:
    # Django refuses to save a session deleted meanwhile (a logout in another
    # tab) with a 400, raised in a middleware after the page's security
    # header is written; the 400 page then cannot be drawn as usual.
    def delete_sessions_first(
        execute: Any, sql: Any, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        if str(sql).startswith('UPDATE "django_session"'):
            with psycopg.connect(
                **connection_params(str(connection.settings_dict["USER"])), autocommit=True
            ) as other:
                other.execute("DELETE FROM django_session")
        return execute(sql, params, many, context)

    client = Client(raise_request_exception=False)
    with connection.execute_wrapper(delete_sessions_first):
        response = client.post("/login/", {"username": reviewer.username, "password": PASSWORD})

    assert response.status_code == 400, response.content[:300]
    assert "Not accepted" in response.content.decode()


def test_a_write_whose_commit_loses_the_database_answers_503_and_its_retry_stores_it_once(
    agent_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The commit is no statement a wrapper sees: the session ends as it is sent.
    commit = DatabaseWrapper._commit  # type: ignore[attr-defined]  # private, absent from the stubs
    lost: list[int] = []

    def commit_after_losing_the_session(self: DatabaseWrapper) -> None:
        if not lost:
            lost.append(self.connection.info.backend_pid)
            end_session(lost[0])
        commit(self)

    monkeypatch.setattr(DatabaseWrapper, "_commit", commit_after_losing_the_session)
    body = write_body("Prefers tea.")
    send = lambda: agent_client.post("/api/v1/writes", body, format="json", HTTP_IDEMPOTENCY_KEY="tea")  # noqa: E731

    first = send()
    connection.close()
    retry = send()

    assert lost and api_unavailable(first), first.content
    assert retry.status_code == 201, retry.content
    assert Write.objects.filter(idempotency_key="tea").count() == 1


@contextmanager
def database_down() -> Iterator[None]:
    """No new connection can be made, as while PostgreSQL is stopped."""

    def refused(self: DatabaseWrapper, conn_params: dict[str, Any]) -> Any:
        raise psycopg.OperationalError("connection refused: is the server running?")

    connection.close()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseWrapper, "get_new_connection", refused)
        yield


def test_while_the_database_is_down_the_api_answers_503_in_its_error_shape(agent_client: Any) -> None:
    with database_down():
        response = agent_client.post("/api/v1/writes", write_body("Prefers tea."), format="json")

    assert api_unavailable(response), response.content
    assert "Idempotency-Key" in response.json()["error"]["message"]


def test_while_the_database_is_down_the_console_answers_a_plain_503_page(reviewer_client: Client) -> None:
    with database_down():
        response = reviewer_client.get("/reviews/")

    assert console_unavailable(response), response.content
    # Drawn without the database: no menu, no name of the person.
    assert "Log out" not in response.content.decode()
