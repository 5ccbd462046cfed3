"""governance.rls: the projects setting, sent on the raw connection, fails like any statement."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from governance import rls
from governance.models import Project, Write
from tests.governance.database_helpers import end_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("in_transaction", [True, False], ids=["in a transaction", "autocommit"])
def test_a_session_lost_before_the_projects_are_set_raises_djangos_operational_error(
    project: Project, in_transaction: bool
) -> None:
    # psycopg's own error here was a 500 where every other statement's was a
    # 503: the API and the console answer Django's errors, not the driver's.
    connection.ensure_connection()
    end_session(connection.connection.info.backend_pid)
    try:
        with (
            pytest.raises(OperationalError),
            rls.scope(rls.projects([project.pk])),
            transaction.atomic() if in_transaction else nullcontext(),
        ):
            Write.objects.count()
    finally:
        connection.close()


# Positional and named parameters let the setting travel in front of the
# statement, in its query string; without any it is sent on its own first.
WITH_EACH_KIND_OF_PARAMETERS = pytest.mark.parametrize(
    "params",
    [[0], {"id": 0}, None],
    ids=["sent ahead of the statement", "sent ahead, named parameters", "sent on its own"],
)


@pytest.fixture
def settings_sent_alone(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Statements rls sends on the raw connection by themselves (a round trip each)."""
    connection.ensure_connection()
    raw = connection.connection
    sent: list[str] = []
    execute = raw.execute

    def spy(query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(query, *args, **kwargs)

    monkeypatch.setattr(raw, "execute", spy)
    return sent


@WITH_EACH_KIND_OF_PARAMETERS
def test_the_first_statement_of_a_transaction_sees_the_setting_and_answers_its_own_rows(
    project: Project, params: list[int] | dict[str, int] | None, settings_sent_alone: list[str]
) -> None:
    # With parameters the setting travels in the statement's own query string;
    # without, a literal % must stay as written, so it goes on its own first.
    sql = _setting_and_rows(params)
    with rls.scope(rls.projects([project.pk])), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        assert cursor.fetchall() == [(str(project.pk), "100%", 0)]
        # Set once per transaction: the next statement goes as written.
        cursor.execute("SELECT count(*) FROM governance_write WHERE id = %s", [0])
        assert cursor.fetchall() == [(0,)]
    assert len(settings_sent_alone) == (1 if params is None else 0), settings_sent_alone


@WITH_EACH_KIND_OF_PARAMETERS
def test_a_statement_outside_a_transaction_sees_the_setting_and_leaves_none_behind(
    project: Project, params: list[int] | dict[str, int] | None, settings_sent_alone: list[str]
) -> None:
    # In autocommit the setting and the statement are one transaction of their
    # own (one query string, or BEGIN .. COMMIT around the two): the setting
    # holds for the statement and is gone after it.
    sql = _setting_and_rows(params)
    with rls.scope(rls.projects([project.pk])), connection.cursor() as cursor:
        assert connection.get_autocommit()
        cursor.execute(sql, params)
        assert cursor.fetchall() == [(str(project.pk), "100%", 0)]
        cursor.execute("SELECT current_setting('memoryadmin.projects', true)")
        assert cursor.fetchall() in ([("",)], [(None,)])
    # One query string where there were four round trips (BEGIN, setting, statement, COMMIT).
    assert len(settings_sent_alone) == (1 if params is None else 0), settings_sent_alone


def _setting_and_rows(params: list[int] | dict[str, int] | None) -> str:
    head = "SELECT current_setting('memoryadmin.projects', true), "
    if params is None:
        return head + "'100%', (SELECT count(*) FROM governance_write WHERE id = 0)"
    placeholder = "%(id)s" if isinstance(params, dict) else "%s"
    return head + f"'100%%', (SELECT count(*) FROM governance_write WHERE id = {placeholder})"
