"""The console's session page and the summary-diff partial the review queue includes (issue 7 item 4)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.context import actor_scope
from governance.models import Fact, Principal, Session
from governance.selectors.sessions import principal_sessions, summary_diff
from governance.services.retrievals import RetrieveRequest, retrieve
from governance.services.sessions import EndRequest, end_session
from governance.services.writes import WriteRequest, submit_write
from tests.governance.review_helpers import HOSTILE, assert_inert
from tests.personas import PASSWORD, AgentPersona

pytestmark = pytest.mark.django_db

VP_SOURCE = "running late for a meeting with the VP of Engineering"
HINT = "Ask how the meeting with the VP went."


def ask(bot: AgentPersona, session: str, round: int, query: str = "") -> Any:
    with actor_scope(f"agent:{bot.agent.slug}"):
        return retrieve(
            bot.agent,
            RetrieveRequest(
                principal="alice", session=session, query=query, round=round, identity_verified=True
            ),
        )[0]


def slot(bot: AgentPersona, session: str, statement: str, key: str = "cart") -> Any:
    with actor_scope(f"agent:{bot.agent.slug}"):
        return submit_write(
            bot.agent,
            WriteRequest(
                principal="alice",
                kind="slot",
                key=key,
                statement=statement,
                source_type="user_statement",
                source_ref=f"chat:{session}",
                source_observed_at=timezone.now(),
                session=session,
            ),
        )


def finish(bot: AgentPersona, session: str, *, summary: str, source_text: str, hint: str = HINT) -> Any:
    with actor_scope(f"agent:{bot.agent.slug}"):
        return end_session(
            bot.agent,
            session,
            EndRequest(
                principal="alice",
                summary=summary,
                resume_hint=hint,
                first_event="msg-1",
                last_event="msg-9",
                source_text=source_text,
            ),
        )


def page_url(external_id: str) -> str:
    return reverse("sessions:detail", args=[Session.objects.get(external_id=external_id).pk])


@pytest.fixture
def riley(client: Any, reviewer: Any) -> Any:
    client.force_login(reviewer)
    return client


def test_session_page_shows_rounds_writes_summary_diff_and_hint(
    riley: Any, support_bot: AgentPersona
) -> None:
    first = ask(support_bot, "s-1", 1)
    cart = slot(support_bot, "s-1", "Cart holds 2 items")
    second = ask(support_bot, "s-1", 2, query="What is in my cart?")
    ended = finish(support_bot, "s-1", summary="User is late for a meeting.", source_text=VP_SOURCE)

    response = riley.get(page_url("s-1"))

    assert response.status_code == 200
    html = response.content.decode()
    for event in (first, second):
        assert f'href="{reverse("retrievals:detail", args=[event.pk])}"' in html
    for write in (cart, ended.write):
        assert f'href="{reverse("facts:detail", args=[write.fact_id])}"' in html
    assert "What is in my cart?" in html
    # The dropped title is marked inside the source, the rest of the source is not.
    source = re.search(r"<p class=\"memory-text\" data-source>(.*?)</p>", html, re.S)
    assert source is not None
    assert source.group(1) == "running late for a meeting with the <mark>VP of Engineering</mark>"
    assert re.findall(r"<mark>([^<]*)</mark>", source.group(1)) == ["VP of Engineering"]
    assert "data-summary>User is late for a meeting.</p>" in html
    assert f"data-resume-hint>{HINT}</p>" in html
    # A pending summary links to the queue for a reviewer.
    assert f'href="{reverse("reviews:queue")}#write-{ended.write.pk}"' in html


def test_every_piece_of_conversation_text_is_inert(riley: Any, support_bot: AgentPersona) -> None:
    ask(support_bot, "s-1", 1, query=HOSTILE)
    slot(support_bot, "s-1", HOSTILE)
    finish(support_bot, "s-1", summary="User named a product.", source_text=HOSTILE, hint=HOSTILE)

    html = riley.get(page_url("s-1")).content.decode()

    # The query, the slot write, the source in the diff and the hint: all text, all under hx-disable.
    assert assert_inert(html) >= 4
    assert "<script" not in html.split("<body", 1)[1].replace('<script src="/static/', "")


def test_page_cost_does_not_grow_with_the_session(riley: Any, support_bot: AgentPersona) -> None:
    ask(support_bot, "small", 1)
    finish(support_bot, "small", summary="User is late for a meeting.", source_text=VP_SOURCE)
    for n in range(1, 6):
        slot(support_bot, "large", f"Cart holds {n} items", key=f"cart-{n}")
        ask(support_bot, "large", n)
    finish(support_bot, "large", summary="User is late for a meeting.", source_text=VP_SOURCE)

    with CaptureQueriesContext(connection) as small:
        assert riley.get(page_url("small")).status_code == 200
    with CaptureQueriesContext(connection) as large:
        assert riley.get(page_url("large")).status_code == 200

    assert len(large.captured_queries) == len(small.captured_queries)


def test_another_projects_session_is_404_and_the_page_needs_login(
    client: Any, outsider: Any, support_bot: AgentPersona
) -> None:
    ask(support_bot, "s-1", 1)
    url = page_url("s-1")
    assert client.get(url).status_code == 302
    client.login(username=outsider.username, password=PASSWORD)
    assert client.get(url).status_code == 404


def test_summary_diff_partial_renders_standalone_for_the_review_queue(support_bot: AgentPersona) -> None:
    ended = finish(
        support_bot, "s-1", summary="User is late for a meeting.", source_text=VP_SOURCE + " <b>x</b>"
    )
    fact = Fact.objects.get(pk=ended.write.fact_id)

    html = render_to_string("governance/sessions/_summary_diff.html", {"diff": summary_diff(fact)})

    assert "<mark>VP of Engineering</mark>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "hx-disable" in html.split(">", 1)[0]
    assert re.search(
        r"<li><span class=\"badge\">title</span> <span class=\"memory-text\">VP of Engineering", html
    )
    assert "data-session-link" not in html
    # The queue passes the write's session so the reviewer can open it.
    session_id = ended.session.pk
    linked = render_to_string(
        "governance/sessions/_summary_diff.html", {"diff": summary_diff(fact), "session_id": session_id}
    )
    assert f'<a href="{reverse("sessions:detail", args=[session_id])}" data-session-link>' in linked


def test_principal_sessions_lists_a_persons_sessions_newest_first(support_bot: AgentPersona) -> None:
    ask(support_bot, "s-1", 1)
    finish(support_bot, "s-1", summary="User is late for a meeting.", source_text=VP_SOURCE)
    ask(support_bot, "s-2", 1)
    with actor_scope("agent:support-bot"):
        retrieve(
            support_bot.agent,
            RetrieveRequest(principal="bob", session="b-1", query="", round=1, identity_verified=True),
        )
    alice = Principal.objects.get(external_id="alice")

    assert [s.external_id for s in principal_sessions(alice)] == ["s-2", "s-1"]


# --- The session list (issue 16 item 7) ----------------------------------------


def test_the_session_list_links_sessions_people_and_their_retrievals(client, auditor, project, support_bot):
    ask(support_bot, "chat-77", 1, "what plan am I on?")
    session = Session.objects.get(external_id="chat-77")
    client.force_login(auditor)
    html = client.get(reverse("sessions:index"), {"principal": "alice"}).content.decode()
    assert f'href="/sessions/{session.pk}/"' in html
    assert 'href="/retrievals/principals/acme/alice/?agent=' in html
    assert 'href="/retrievals/?session=chat-77&amp;agent=' in html
    bob = client.get(reverse("sessions:index"), {"principal": "bob"}).content.decode()
    assert not re.search(r'href="/sessions/\d+/"', bob)
    # The retrieval log links the session too.
    assert (
        f'href="/sessions/{session.pk}/" data-session-link'
        in client.get(reverse("retrievals:log")).content.decode()
    )
