"""The console's session list (issue 16 item 7): filters, retrieval counts, scope, one query."""

from __future__ import annotations

from typing import Any

import pytest

from governance.models import Session
from governance.selectors.sessions import SessionFilters, session_list
from tests.personas import PrincipalFactory, make_agent, make_retrieval_event

pytestmark = pytest.mark.django_db


def test_sessions_with_their_retrieval_counts_filtered_and_scoped(
    project, other_project, django_assert_num_queries
):
    bot = make_agent(project, "support-bot")
    helper = make_agent(project, "helper-bot")
    spy = make_agent(other_project, "support-bot")
    carol = PrincipalFactory.create(project=project, external_id="carol")
    first = Session.objects.create(
        project=project, agent=bot.agent, principal=carol, external_id="chat-1", mode="resume"
    )
    second = Session.objects.create(project=project, agent=helper.agent, external_id="chat-2", mode="fresh")
    Session.objects.create(project=other_project, agent=spy.agent, external_id="chat-3")
    for _ in range(2):
        make_retrieval_event(bot.agent, session=first, principal=carol)

    def listed(**filters):
        return [
            s.pk for s in session_list([project.pk], SessionFilters(**filters), cursor=None, limit=50).items
        ]

    with django_assert_num_queries(1):
        page = session_list([project.pk], SessionFilters(), cursor=None, limit=50)
        rows: list[Any] = page.items  # with the page's annotations
        assert [(s.external_id, s.retrieval_count, s.agent.slug) for s in rows] == [
            ("chat-2", 0, "helper-bot"),
            ("chat-1", 2, "support-bot"),
        ]
    assert listed(agent="support-bot") == [first.pk]  # the other project's support-bot stays out
    assert listed(principal="carol") == [first.pk]
    assert listed(mode="fresh") == [second.pk]
    assert listed(text="AT-2") == [second.pk]
    assert listed(project=other_project.pk) == []
