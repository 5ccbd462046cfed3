"""``memory_eval --url``: scenarios played through a live server's HTTP API (docs/quality.md)."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from governance.context import actor_scope
from governance.models import Fact, Write
from governance.services import credentials, evaluations
from governance.services.evaluations_http import skip_reason
from tests.personas import make_agent, make_user

pytestmark = pytest.mark.django_db(transaction=True)

SHIPPED = evaluations.SCENARIO_DIR


def _eval(*args: str) -> tuple[dict[str, Any], str]:
    out = StringIO()
    try:
        call_command("memory_eval", *args, "--json", stdout=out)
    except CommandError as exc:
        return json.loads(out.getvalue()), f"exit {exc.returncode}"
    return json.loads(out.getvalue()), "exit 0"


def test_scenarios_play_end_to_end_over_http_and_the_rest_are_skipped_with_a_reason(live_server, project):
    bot = make_agent(project, "eval-bot")
    reviewer = make_user("rita", "reviewer", project)
    with actor_scope("test"):
        _, token = credentials.create_access_token(reviewer)

    document, exit_code = _eval(
        str(SHIPPED / "swapped_identifiers.yaml"),
        str(SHIPPED / "reviewer_decisions.yaml"),
        str(SHIPPED / "stale_python_version.yaml"),
        str(SHIPPED / "broken" / "broken_policy.yaml"),
        "--url",
        live_server.url,
        "--key",
        bot.key,
        "--token",
        token,
    )

    assert exit_code == "exit 0", document
    played = {s["name"]: s for s in document["scenarios"]}
    assert set(played) == {"swapped-identifiers", "reviewer-decisions"}
    assert all(s["passed"] for s in played.values())
    assert played["swapped-identifiers"]["recall"] == 1.0
    assert played["swapped-identifiers"]["contamination"] == 0.0
    skipped = {s["name"]: s["reason"] for s in document["skipped"]}
    assert skipped == {
        "stale-python-version": "it moves the scenario clock, which the API cannot do",
        "broken-policy": "it sets up its agent's own policy or sources; over HTTP the agent is what it is",
    }
    # It really went through the API: the writes are the agent's, in its project, with tagged people,
    # and the reviewer's decisions were taken with the person's token.
    writes = Write.objects.filter(agent=bot.agent)
    assert writes.exists() and not Write.objects.exclude(project=project).exists()
    assert all(w.principal is None or w.principal.external_id.count("-") >= 1 for w in writes)
    assert writes.filter(decisions__reviewer=reviewer).exists()
    assert Fact.objects.filter(project=project, status="active").exists()


def test_without_a_token_reviewer_scenarios_are_skipped_and_nothing_played_is_not_a_pass(
    live_server, project
):
    bot = make_agent(project, "eval-bot")

    document, exit_code = _eval(
        str(SHIPPED / "reviewer_decisions.yaml"), "--url", live_server.url, "--key", bot.key
    )

    assert document["scenarios"] == []
    assert document["skipped"] == [
        {
            "name": "reviewer-decisions",
            "reason": "it needs a reviewer's decision: give a person's access token",
        }
    ]
    assert exit_code == "exit 1"


def test_a_wrong_key_is_an_error_not_a_pass(live_server, project):
    document, exit_code = _eval(
        str(SHIPPED / "swapped_identifiers.yaml"), "--url", live_server.url, "--key", "mk_not-a-key"
    )
    assert exit_code == "exit 1"
    assert document["scenarios"][0]["passed"] is False


def test_which_shipped_scenarios_http_can_play():
    playable = {
        path.stem
        for path in evaluations.shipped_scenarios()
        if skip_reason(evaluations.load_scenario(path), has_token=True) is None
    }
    assert {"swapped_identifiers", "budget_pressure_500", "freshness_tiers", "poisoned_web_page"} <= playable
    assert "expiry_by_validity" not in playable and "project_end_of_scope" not in playable
