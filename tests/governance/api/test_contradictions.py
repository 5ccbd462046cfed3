"""Contradictions without a key, through the agent API (R6, R14, R18).

Issue "Memory that stays right", item 2: two unkeyed statements giving one
attribute of one person (or project) different values used to be injected side
by side. The labelled set in tests/data/contradictions.yaml is replayed here:
at least 90% must come out right, and no near-miss may lose a statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import transaction
from django.utils import timezone

from governance.models import Fact, Supersession, Write
from tests.helpers import candidate
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parents[2] / "data" / "contradictions.yaml").read_text()
)["cases"]


def write(agent: AgentPersona, statement: str, **fields: Any) -> Any:
    observed = timezone.now() - fields.pop("age", timedelta(0))
    body = {
        "principal": fields.pop("principal", "alice"),
        "kind": fields.pop("kind", "profile"),
        "statement": statement,
        "source": {
            "type": fields.pop("source", "user_statement"),
            "ref": fields.pop("ref", "chat:1"),
            "observed_at": observed.isoformat(),
        },
        **fields,
    }
    response = agent.client.post("/api/v1/writes", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def retrieve(agent: AgentPersona, principal: str | None = "alice", session: str = "s-1") -> Any:
    response = agent.client.post(
        "/api/v1/retrieve",
        {"principal": principal, "session": session, "round": 1, "identity_verified": True},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def reason_for(data: Any, fact_id: int) -> str | None:
    return candidate(data["retrieval_id"], fact_id).reason


def test_a_switch_of_language_injects_only_the_new_one(support_bot: AgentPersona) -> None:
    python = write(support_bot, "I use Python for most of my work.", age=timedelta(days=3))
    rust = write(support_bot, "I've switched to Rust.", ref="chat:2")

    assert rust["supersedes"] == [python["fact"]["id"]]
    context = retrieve(support_bot)["context"]
    assert "switched to Rust" in context and "Python" not in context
    link = Supersession.objects.get(old_fact_id=python["fact"]["id"])
    assert "programming language" in link.reason


def test_a_newer_postgresql_version_replaces_the_older(config_bot: AgentPersona) -> None:
    project = {"principal": None, "kind": "project_fact", "source": "config"}
    old = write(config_bot, "We run PostgreSQL 15.", ref="infra.yml@v1", age=timedelta(days=2), **project)
    write(config_bot, "We run PostgreSQL 17.", ref="infra.yml@v2", **project)

    data = retrieve(config_bot, principal=None)
    assert "PostgreSQL 17" in data["context"] and "PostgreSQL 15" not in data["context"]
    assert reason_for(data, old["fact"]["id"]) == "superseded"


def test_an_older_snippet_is_caught_against_a_keyed_fact(support_bot: AgentPersona) -> None:
    rust = write(support_bot, "I've switched to Rust.", key="primary_language", age=timedelta(days=1))
    snippet = write(support_bot, "I write all my scripts in Python.", ref="chat:old", age=timedelta(days=30))

    assert snippet["fact"]["status"] == "superseded"
    assert Supersession.objects.filter(
        old_fact_id=snippet["fact"]["id"], new_fact_id=rust["fact"]["id"]
    ).exists()
    context = retrieve(support_bot)["context"]
    assert "Rust" in context and "Python" not in context


def test_hearsay_waits_for_a_reviewer_instead_of_replacing_the_persons_word(
    support_bot: AgentPersona,
) -> None:
    python = write(support_bot, "I use Python for most of my work.", age=timedelta(days=3))
    guess = write(support_bot, "The user has switched to Rust.", source="model_inference", ref="agent:guess")

    assert guess["status"] == "pending_review"
    assert any(f["check"] == "conflict" and "programming language" in f["detail"] for f in guess["findings"])
    assert Write.objects.get(pk=guess["id"]).conflicts_with_id == python["fact"]["id"]
    assert "Python" in retrieve(support_bot)["context"]


def test_approving_the_held_write_replaces_the_old_value(support_bot: AgentPersona, reviewer: Any) -> None:
    from governance.services import reviews

    python = write(support_bot, "I use Python for most of my work.", age=timedelta(days=3))
    guess = write(support_bot, "The user has switched to Rust.", source="model_inference", ref="agent:guess")
    reviews.decide(guess["id"], reviews.Decision("approve", "Confirmed on the phone"), reviewer=reviewer)

    assert Fact.objects.get(pk=python["fact"]["id"]).status == "superseded"
    assert Fact.objects.get(pk=guess["fact"]["id"]).status == "active"
    assert "Python" not in retrieve(support_bot)["context"]


def test_an_uncertain_contradiction_keeps_both_but_injects_the_newer(support_bot: AgentPersona) -> None:
    leeds = write(support_bot, "I live in Leeds.", age=timedelta(days=3))
    maybe = write(support_bot, "I think I live in York now, mostly.", ref="chat:2")

    assert maybe["status"] == "active" and maybe["supersedes"] == []
    assert any(f["check"] == "possible_conflict" for f in maybe["findings"])
    assert Fact.objects.get(pk=leeds["fact"]["id"]).status == "active"
    data = retrieve(support_bot)
    assert "York" in data["context"] and "Leeds" not in data["context"]
    assert reason_for(data, leeds["fact"]["id"]) == "conflict_lost"


def test_different_people_keep_their_own_cities(support_bot: AgentPersona) -> None:
    write(support_bot, "I live in Leeds.", age=timedelta(days=3))
    write(support_bot, "I live in Manchester.", principal="bob")

    assert "Leeds" in retrieve(support_bot)["context"]
    assert "Manchester" in retrieve(support_bot, principal="bob", session="s-bob")["context"]


def _replay(
    case: Mapping[str, Any], support_bot: AgentPersona, config_bot: AgentPersona
) -> tuple[bool, bool]:
    """(older injected, newer injected) after writing the pair through the API."""
    principal = case.get("principal", "alice")
    agent = config_bot if case.get("source") == "config" else support_bot
    common = {
        "kind": case.get("kind", "profile"),
        "source": case.get("source", "user_statement"),
    }
    write(agent, case["older"], principal=principal, ref="chat:older", age=timedelta(days=3), **common)
    newer_principal = case.get("newer_principal", principal)
    write(agent, case["newer"], principal=newer_principal, ref="chat:newer", **common)
    context = retrieve(agent, principal=principal, session="s-old")["context"]
    if newer_principal != principal:
        context += retrieve(agent, principal=newer_principal, session="s-new")["context"]
    return case["older"] in context, case["newer"] in context


def test_the_labelled_contradictions_are_resolved(
    support_bot: AgentPersona, config_bot: AgentPersona
) -> None:
    assert len([c for c in CASES if c["contradicts"]]) >= 30
    right = 0
    suppressed: list[str] = []
    wrong: list[str] = []
    for case in CASES:
        with transaction.atomic():
            older, newer = _replay(case, support_bot, config_bot)
            # Each case starts from an empty memory.
            transaction.set_rollback(True)
        expected = (not case["contradicts"], True)
        if (older, newer) == expected:
            right += 1
        else:
            wrong.append(f"{case['older']} / {case['newer']}: older {older}, newer {newer}")
        if not case["contradicts"] and not (older and newer):
            suppressed.append(f"{case['older']} / {case['newer']}")
    accuracy = right / len(CASES)
    assert accuracy >= 0.9, f"{accuracy:.2f} right; wrong: {wrong}"
    assert suppressed == []
