"""governance.prepared: the retrieval's big reads planned once per connection, one statement to Django."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from governance import prepared, rls
from governance.models import Project

pytestmark = pytest.mark.django_db(transaction=True)

# The projects setting as the statement sees it (rls sets it in front), a
# literal %, and a read of a table under row-level security.
SQL = (
    "SELECT current_setting('memoryadmin.projects', true), '100%%', "
    "(SELECT count(*) FROM governance_write WHERE id = %(id)s OR id = %(id)s + %(step)s)"
)


def _own(sql: str) -> str:
    """A statement as sent, without the projects setting rls may have put in front of it."""
    return sql.split("; ", 1)[1] if sql.startswith("SELECT set_config(") else sql


def _server_side() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in cursor.fetchall()}


@pytest.fixture
def fresh_connection() -> Iterator[None]:
    """A connection with nothing prepared on it yet."""
    connection.close()
    yield
    connection.close()


def test_placeholders_are_numbered_a_name_used_twice_is_one_parameter() -> None:
    statement = prepared.compile_statement(SQL)
    assert statement.name.startswith(prepared.NAME_PREFIX)
    assert statement.text == (
        "SELECT current_setting('memoryadmin.projects', true), '100%', "
        "(SELECT count(*) FROM governance_write WHERE id = $1 OR id = $1 + $2)"
    )
    assert statement.names == ("id", "step") and statement.count == 2
    assert statement.values({"step": 1, "id": 7, "unused": 0}) == [7, 1]
    assert statement.call() == f"EXECUTE {statement.name}(%s, %s)"

    positional = prepared.compile_statement("SELECT %s + %s")
    assert (positional.text, positional.names, positional.count) == ("SELECT $1 + $2", None, 2)
    # One name per text: another statement is another prepared statement.
    assert positional.name != statement.name
    with pytest.raises(ValueError, match="named and positional"):
        prepared.compile_statement("SELECT %(a)s + %s")


def test_the_first_use_prepares_later_ones_execute_and_django_sees_one_statement_each(
    project: Project, fresh_connection: None
) -> None:
    name = prepared.compile_statement(SQL).name
    with (
        rls.scope(rls.projects([project.pk])),
        transaction.atomic(),
        CaptureQueriesContext(connection) as seen,
        connection.cursor() as cursor,
    ):
        for _ in range(3):
            prepared.execute(cursor, SQL, {"id": 0, "step": 1})
            # The scope was set in front of the EXECUTE: the statement sees it.
            assert cursor.fetchall() == [(str(project.pk), "100%", 0)]
    sent = [_own(query["sql"]) for query in seen.captured_queries]
    assert len(sent) == 3, sent
    assert f"PREPARE {name} AS " in sent[0] and f"EXECUTE {name}(0, 1)" in sent[0]
    assert sent[1] == sent[2] == f"EXECUTE {name}(0, 1)"
    assert name in _server_side()
    assert prepared.prepared_on(connection) == {name}


def test_outside_a_transaction_the_scope_holds_for_the_prepared_read(
    project: Project, fresh_connection: None
) -> None:
    with rls.scope(rls.projects([project.pk])), connection.cursor() as cursor:
        assert connection.get_autocommit()
        for _ in range(2):
            prepared.execute(cursor, SQL, {"id": 0, "step": 1})
            assert cursor.fetchall() == [(str(project.pk), "100%", 0)]


def test_after_an_error_the_next_use_deallocates_and_prepares_again(fresh_connection: None) -> None:
    # The failing string prepared its statement before its EXECUTE failed, and
    # a rollback does not undo a PREPARE: preparing it again as if nothing
    # were there would fail with "already exists".
    sql = "SELECT 10 / %s"
    with pytest.raises(DataError), transaction.atomic(), connection.cursor() as cursor:
        prepared.execute(cursor, sql, [0])
    assert prepared.prepared_on(connection) == set()
    with CaptureQueriesContext(connection) as seen, connection.cursor() as cursor:
        prepared.execute(cursor, sql, [5])
        assert cursor.fetchall() == [(2,)]
        prepared.execute(cursor, sql, [2])
        assert cursor.fetchall() == [(5,)]
    assert _own(seen.captured_queries[0]["sql"]).startswith("DEALLOCATE ALL; PREPARE ")
    assert _own(seen.captured_queries[1]["sql"]).startswith("EXECUTE ")


@pytest.mark.parametrize("how", ["setting", "pooler"])
def test_off_behind_a_transaction_pooler_or_when_turned_off(
    how: str, fresh_connection: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if how == "setting":
        settings.DATABASE_PREPARED_STATEMENTS = False
    else:
        # DATABASE_PGBOUNCER marks its connections so (memoryadmin/settings.py).
        monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)
    with CaptureQueriesContext(connection) as seen, connection.cursor() as cursor:
        prepared.execute(cursor, "SELECT %s + 1", [1])
        assert cursor.fetchall() == [(2,)]
    assert seen.captured_queries[0]["sql"] == "SELECT 1 + 1"
    assert not {name for name in _server_side() if name.startswith(prepared.NAME_PREFIX)}


def test_past_the_cap_a_statement_is_sent_as_written(
    fresh_connection: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prepared, "MAX_PER_CONNECTION", 1)
    with CaptureQueriesContext(connection) as seen, connection.cursor() as cursor:
        prepared.execute(cursor, "SELECT %s + 1", [1])
        prepared.execute(cursor, "SELECT %s + 2", [1])
        assert cursor.fetchall() == [(3,)]
    assert [_own(q["sql"]).split()[0] for q in seen.captured_queries] == ["PREPARE", "SELECT"]


def test_a_statement_is_prepared_again_as_its_use_doubles(
    fresh_connection: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A generic plan made while a table was nearly empty reads it whole for as
    # long as it is kept; planned again as its use doubles, it follows the table.
    monkeypatch.setattr(prepared, "REPREPARE_FROM", 2)
    sql = "SELECT %s * 2"
    name = prepared.compile_statement(sql).name
    with CaptureQueriesContext(connection) as seen, connection.cursor() as cursor:
        for value in range(1, 10):
            prepared.execute(cursor, sql, [value])
            assert cursor.fetchall() == [(value * 2,)]
    sent = [_own(q["sql"]).split(" AS ")[0] for q in seen.captured_queries]
    again, once = f"DEALLOCATE {name}; PREPARE {name}", f"EXECUTE {name}"
    assert sent == [
        f"PREPARE {name}",
        f"{once}(2)",
        again,  # the 3rd use, after 2
        f"{once}(4)",
        again,  # after 4
        *(f"{once}({value})" for value in (6, 7, 8)),
        again,  # after 8
    ]
