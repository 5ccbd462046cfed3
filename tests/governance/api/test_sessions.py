"""POST /api/v1/sessions/{session}/end and the three memory layers through the agent API (issue 7).

Slots (in-session), the summary and resume hint (between sessions, R17), the
profile (across sessions, R9's resume / confirm / new), each asserted on what
an agent or a reviewer would see: statuses, findings and exact context text.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance.models import Fact, Principal, Project, RetrievalEvent, Session
from governance.rules.rendering import (
    BLOCK_SEPARATOR,
    CONFIRM_LINE,
    ITEM_PREFIX,
    NEW_LINE,
    PRINCIPAL_HEADING,
    PRIORITY,
    PROJECT_HEADING,
    RECONFIRM_PREFIX,
    RESUME_HINT_PREFIX,
    RESUME_LINE,
    ROUND_HEADING,
)
from governance.selectors.reviews import review_queue
from tests.personas import AgentPersona, token_client

pytestmark = pytest.mark.django_db

VP_SOURCE = "running late for a meeting with the VP of Engineering"
VP_SUMMARY = "user is late for a meeting"
CALL_SOURCE = "I prefer phone calls to email, but never call after 6pm. My number is on the ticket."
CALL_SUMMARY = "Prefers phone calls to email; the number is on the ticket."


def end(
    agent: AgentPersona,
    session: str,
    *,
    summary: str,
    source_text: str | None = None,
    resume_hint: str = "",
    principal: str = "alice",
) -> Any:
    body = {
        "principal": principal,
        "summary": summary,
        "resume_hint": resume_hint,
        "first_event": "msg-1",
        "last_event": "msg-9",
        "source_text": source_text,
    }
    return agent.client.post(f"/api/v1/sessions/{session}/end", body, format="json")


def summary_findings(data: dict[str, Any]) -> list[dict[str, str]]:
    return [f for f in data["summary"]["findings"] if f["check"] == "summary_check"]


def reasons(retrieval_id: int) -> dict[int, str | None]:
    return {c.fact_id: c.reason for c in RetrievalEvent.objects.get(pk=retrieval_id).candidates}


# --- R17: the summary check, through the API -------------------------------------


def test_summary_that_drops_the_vp_of_engineering_is_flagged_and_waits_in_the_queue(
    support_bot: AgentPersona, project: Project, reviewer: Any
) -> None:
    response = end(support_bot, "s-vp", summary=VP_SUMMARY, source_text=VP_SOURCE)

    assert response.status_code == 200, response.content
    data = response.json()
    assert data["summary"]["status"] == "pending_review"
    assert data["summary"]["fact"]["status"] == "pending_review"
    start = VP_SOURCE.index("VP of Engineering")
    assert data["summary"]["check"] == {
        "material": True,
        "dropped": [{"category": "title", "text": "VP of Engineering", "start": start, "end": start + 17}],
    }
    assert summary_findings(data) == [
        {
            "check": "summary_check",
            "severity": "medium",
            "detail": (
                "The summary leaves out what the conversation said: title: \u201cVP of Engineering\u201d."
            ),
        }
    ]
    # The source is kept with the check, so the console can show the diff.
    fact = Fact.objects.get(pk=data["summary"]["fact"]["id"])
    assert (fact.kind, fact.summary_source, fact.event_first, fact.event_last) == (
        "summary",
        VP_SOURCE,
        "msg-1",
        "msg-9",
    )
    assert Session.objects.get(external_id="s-vp").summary_fact_id == fact.pk

    # It waits in the review queue like any other write: the selector and the governance API.
    page = review_queue(Project.objects.filter(pk=project.pk))
    assert [w.pk for w in page.writes] == [data["summary"]["write_id"]]
    listed = token_client(reviewer).get("/api/v1/admin/reviews").json()["results"]
    assert [row["id"] for row in listed] == [data["summary"]["write_id"]]
    assert any(
        "VP of Engineering" in f["detail"] for f in listed[0]["findings"] if f["check"] == "summary_check"
    )


def test_summary_that_drops_never_call_after_6pm_is_flagged(support_bot: AgentPersona) -> None:
    data = end(support_bot, "s-call", summary=CALL_SUMMARY, source_text=CALL_SOURCE).json()

    assert data["summary"]["status"] == "pending_review"
    dropped = [(d["category"], d["text"]) for d in data["summary"]["check"]["dropped"]]
    assert dropped == [("prohibition", "never call after 6pm")]
    [finding] = summary_findings(data)
    assert "prohibition: \u201cnever call after 6pm\u201d" in finding["detail"]


def test_faithful_summary_becomes_active_and_keeps_its_clean_check(support_bot: AgentPersona) -> None:
    faithful = "Prefers phone calls to email but never call after 6pm; the number is on the ticket."
    data = end(support_bot, "s-ok", summary=faithful, source_text=CALL_SOURCE).json()

    assert data["summary"]["status"] == "active"
    assert data["summary"]["fact"]["status"] == "active"
    assert data["summary"]["findings"] == []
    assert data["summary"]["check"] == {"material": False, "dropped": []}
    # Every summary's check result is kept, the clean ones too (R17).
    fact = Fact.objects.get(pk=data["summary"]["fact"]["id"])
    assert fact.summary_check == {"material": False, "dropped": []}


def test_ending_a_session_twice_is_a_conflict_and_another_principal_is_refused(
    support_bot: AgentPersona,
) -> None:
    support_bot.retrieve(session="s-1", round=1)
    assert end(support_bot, "s-1", summary="").status_code == 200
    again = end(support_bot, "s-1", summary="")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"

    support_bot.retrieve(session="s-2", round=1)
    other = end(support_bot, "s-2", summary="", principal="bob")
    assert other.status_code == 400
    assert "session" in other.json()["error"]["fields"]
    assert Session.objects.get(external_id="s-2").ended_at is None


# --- Layer 1: in-session slots -------------------------------------------------------


def test_slot_from_round_one_comes_back_every_later_round_of_its_session_only(
    support_bot: AgentPersona,
) -> None:
    # Alice is new (R9 "new" mode): long-term memory about her is withheld, but
    # what she says in this session is this session's state.
    first = support_bot.retrieve(session="s-1", round=1)
    assert first["mode"] == "new"
    slot = support_bot.write(
        kind="slot",
        key="deployment_region",
        statement="Deploys to eu-west-2",
        ref="chat:s-1/msg-2",
        session="s-1",
    )
    assert slot["status"] == "active"
    elsewhere = support_bot.retrieve(session="s-2", round=1)  # her other, concurrent session

    slot_line = f"{ITEM_PREFIX}Deploys to eu-west-2 [SOURCE: chat:s-1/msg-2 | AUTHORITY: 4 | AGE: 0 days]"
    expected = "\n".join([PRIORITY, NEW_LINE]) + BLOCK_SEPARATOR + "\n".join([ROUND_HEADING, slot_line])
    # Per round, with an empty query and with an unrelated one: slots are never "low relevance".
    second = support_bot.retrieve(session="s-1", round=2)
    third = support_bot.retrieve(session="s-1", round=3, query="What does the invoice say?")
    assert second["context"] == expected
    assert third["context"] == expected
    assert [item["fact_id"] for item in second["items"]] == [slot["fact"]["id"]]

    # Never in another session, not even as an excluded candidate.
    later_elsewhere = support_bot.retrieve(session="s-2", round=2)
    for data in (first, elsewhere, later_elsewhere):
        assert slot["fact"]["id"] not in reasons(data["retrieval_id"])
        assert "eu-west-2" not in data["context"]

    # Ending the session ends its slots (R8 end_of_scope): kept, never injected.
    ended = end(support_bot, "s-1", summary="")
    assert ended.json()["slots_ended"] == 1
    assert Fact.objects.get(pk=slot["fact"]["id"]).status == "out_of_scope"
    after = support_bot.retrieve(session="s-1", round=4)
    assert reasons(after["retrieval_id"])[slot["fact"]["id"]] == "not_active"
    assert "eu-west-2" not in after["context"]
    next_session = support_bot.retrieve(session="s-3", round=1)
    assert slot["fact"]["id"] not in reasons(next_session["retrieval_id"])


def test_a_slot_cannot_be_written_to_an_ended_session(support_bot: AgentPersona) -> None:
    support_bot.retrieve(session="s-1", round=1)
    end(support_bot, "s-1", summary="")
    body = {
        "principal": "alice",
        "kind": "slot",
        "key": "cart",
        "statement": "Cart holds 2 items",
        "session": "s-1",
        "source": {"type": "user_statement", "ref": "chat:late", "observed_at": timezone.now().isoformat()},
    }
    response = support_bot.client.post("/api/v1/writes", body, format="json")
    assert response.status_code == 400
    assert "session" in response.json()["error"]["fields"]
    assert not Fact.objects.filter(kind="slot").exists()


# --- Layers 2 and 3: the next session's block by time since the last one (R9) ----------

HINT = "Was comparing the Pro and Team plans; send the quote next."
PROFILE = "Prefers email over phone calls"
PROJECT_ITEM = (
    f"{ITEM_PREFIX}Support hours are 9:00-17:00 CET [SOURCE: docs/support.md | AUTHORITY: 5 | AGE: 0 days]"
)


def _last_seen(days: int) -> None:
    """Move alice's whole past back ``days`` days: her last session and what she told us."""
    then = timezone.now() - timedelta(days=days)
    alice = Principal.objects.get(external_id="alice")
    Principal.objects.filter(pk=alice.pk).update(last_seen_at=then)
    Session.objects.filter(principal=alice).update(started_at=then, ended_at=then)
    Fact.objects.filter(principal=alice).update(source_observed_at=then, last_verified_at=then)


@pytest.mark.parametrize(
    ("days", "mode", "expected"),
    [
        (
            2,
            "resume",
            [
                PRIORITY,
                RESUME_LINE,
                # The hint is tagged like every item: its summary's session and range, and its age.
                RESUME_HINT_PREFIX
                + HINT
                + " [SOURCE: session:s-1#msg-1..msg-9 | AUTHORITY: 2 | AGE: 2 days]",
                PROJECT_HEADING,
                PROJECT_ITEM,
                PRINCIPAL_HEADING,
                f"{ITEM_PREFIX}{PROFILE} [SOURCE: chat:1 | AUTHORITY: 4 | AGE: 2 days]",
            ],
        ),
        (
            20,
            "confirm",
            [
                PRIORITY,
                CONFIRM_LINE,
                PROJECT_HEADING,
                PROJECT_ITEM,
                PRINCIPAL_HEADING,
                f"{ITEM_PREFIX}{RECONFIRM_PREFIX}{PROFILE} [SOURCE: chat:1 | AUTHORITY: 4 | AGE: 20 days]",
            ],
        ),
        (200, "new", [PRIORITY, NEW_LINE, PROJECT_HEADING, PROJECT_ITEM]),
    ],
)
def test_next_session_block_follows_time_since_last_seen(
    support_bot: AgentPersona, days: int, mode: str, expected: list[str]
) -> None:
    support_bot.write(statement=PROFILE, ref="chat:1")
    support_bot.write(
        principal=None,
        kind="project_fact",
        statement="Support hours are 9:00-17:00 CET",
        source="documentation",
        ref="docs/support.md",
    )
    support_bot.retrieve(session="s-1", round=1)
    ended = end(
        support_bot,
        "s-1",
        summary="Compared the Pro and Team plans.",
        source_text="Can you compare the Pro and Team plans for me?",
        resume_hint=HINT,
    ).json()
    assert ended["summary"]["status"] == "active"
    _last_seen(days)

    data = support_bot.retrieve(session="s-2", round=1)

    assert data["mode"] == mode
    assert data["context"] == "\n".join(expected)
