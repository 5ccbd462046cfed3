"""No 500s from input (issue 12, issue 19.9): every malformed request gets a JSON 4xx.

Each case was a 500 (or Django's HTML error page) before; each answers the
API's error shape ``{"error": {"code", "message", "fields"}}`` now.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from governance.api.limits import MAX_JSON_DEPTH, MAX_ROUND
from governance.models import AuditEntry, Session
from governance.rules.summaries import MAX_SOURCE_CHARS
from tests.personas import AgentPersona, token_client

pytestmark = pytest.mark.django_db


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["message"]
    return body["error"]


def end_body(**changes: Any) -> dict[str, Any]:
    return {
        "principal": "alice",
        "summary": "Prefers email.",
        "resume_hint": "",
        "first_event": "1",
        "last_event": "2",
        **changes,
    }


def raw_post(agent: AgentPersona, path: str, body: str, **extra: Any) -> Any:
    return agent.client.post(path, data=body, content_type="application/json", **extra)


# --- Path parameters ----------------------------------------------------------


def test_a_300_character_session_id_is_404_json_and_creates_nothing(support_bot):
    response = support_bot.client.post(f"/api/v1/sessions/{'s' * 300}/end", end_body(), format="json")
    error_of(response, 404)
    assert not Session.objects.exists()


def test_a_200_character_session_id_still_works(support_bot):
    response = support_bot.client.post(f"/api/v1/sessions/{'s' * 200}/end", end_body(), format="json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/principals/%00x/memories",
        "/api/v1/principals/a%1Fb/memories",
        "/api/v1/principals/" + "p" * 201 + "/memories",
    ],
)
def test_control_characters_or_overlong_ids_in_a_read_path_are_404_json(support_bot, path):
    error_of(support_bot.client.get(path), 404)


def test_a_nul_byte_in_a_session_path_is_404_json(support_bot):
    response = support_bot.client.post("/api/v1/sessions/a%00b/end", end_body(), format="json")
    error_of(response, 404)
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    "path", ["/api/v1/facts/99999999999999999999", "/api/v1/writes/9223372036854775808", "/api/v1/facts/0"]
)
def test_ids_beyond_bigint_are_404_json(support_bot, path):
    error_of(support_bot.client.get(path), 404)


def test_an_unknown_api_path_is_404_json(support_bot):
    error_of(support_bot.client.get("/api/v1/nothing-here"), 404)


# --- Bounded numbers in bodies -----------------------------------------------


@pytest.mark.parametrize("round_", [10**30, MAX_ROUND + 1, 0, -1])
def test_a_round_out_of_range_is_400_naming_the_field(support_bot, round_):
    body = json.dumps({"principal": "alice", "session": "s-1", "query": "", "round": round_})
    error = error_of(raw_post(support_bot, "/api/v1/retrieve", body), 400)
    assert list(error["fields"]) == ["round"]


def test_derived_from_retrieval_beyond_bigint_is_400(support_bot):
    body = {
        "principal": "alice",
        "kind": "preference",
        "statement": "Prefers email",
        "source": {"type": "user_statement", "ref": "chat:1", "observed_at": timezone.now().isoformat()},
        "derived_from_retrieval": 10**30,
    }
    error = error_of(raw_post(support_bot, "/api/v1/writes", json.dumps(body)), 400)
    assert list(error["fields"]) == ["derived_from_retrieval"]


def test_an_audit_filter_on_a_fact_id_beyond_bigint_is_400(project, auditor):
    error = error_of(token_client(auditor).get("/api/v1/admin/audit", {"fact": str(10**30)}), 400)
    assert list(error["fields"]) == ["fact"]


def test_a_rollback_to_a_version_beyond_integer_is_400(project, support_bot, policy_editor):
    client = token_client(policy_editor)
    response = client.post(
        "/api/v1/admin/projects/acme/agents/support-bot/policy/rollback",
        data=json.dumps({"version": 10**30, "reason": "try"}),
        content_type="application/json",
    )
    assert list(error_of(response, 400)["fields"]) == ["version"]


# --- Bodies ------------------------------------------------------------------


@pytest.mark.parametrize("depth", [5_000, 100_000, MAX_JSON_DEPTH + 1])
def test_deeply_nested_json_is_400(support_bot, depth):
    body = '{"principal": ' + "[" * depth + "]" * depth + "}"
    error = error_of(raw_post(support_bot, "/api/v1/retrieve", body), 400)
    assert "nested too deeply" in error["message"]


def test_nesting_within_the_limit_is_parsed_as_usual(support_bot):
    body = '{"principal": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}"
    error = error_of(raw_post(support_bot, "/api/v1/retrieve", body), 400)
    assert list(error["fields"]) == ["principal"]  # an ordinary validation error


def test_a_3_mb_body_is_413_json(support_bot):
    body = json.dumps(end_body(source_text="a" * 3_000_000))
    error = error_of(raw_post(support_bot, "/api/v1/sessions/s-1/end", body), 413)
    assert error["code"] == "too_large"
    assert error["fields"] == {}
    assert not Session.objects.exists()


def test_a_body_django_itself_refuses_is_json_too(support_bot, settings):
    # Raise our own limit above Django's: Django's check (on reading the body)
    # then refuses it, and the API still answers JSON.
    settings.API_MAX_BODY_BYTES = 10_000_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    body = json.dumps(end_body(source_text="a" * 5_000))
    response = raw_post(support_bot, "/api/v1/sessions/s-1/end", body)
    assert error_of(response, 413)["code"] == "too_large"


def test_the_console_keeps_django_pages_for_unknown_paths(client: Client):
    response = client.get("/no-such-console-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


# --- The summary check's inputs are bounded -------------------------------------


@pytest.mark.parametrize("source_text", ["a" * 100_000, "AB12-" * 20_000])
def test_the_reported_slow_inputs_are_400_at_once(support_bot, source_text):
    response = support_bot.client.post(
        "/api/v1/sessions/s-1/end", end_body(source_text=source_text), format="json"
    )
    error = error_of(response, 400)
    assert error["fields"]["source_text"] == [
        f"The source text can be at most {MAX_SOURCE_CHARS:,} characters. "
        "Send the part of the conversation the summary covers."
    ]
    assert not Session.objects.exists()


def test_a_source_text_at_the_limit_is_checked(support_bot):
    source = ("Never call Alice after 6pm. " * 400)[:MAX_SOURCE_CHARS]
    response = support_bot.client.post(
        "/api/v1/sessions/s-1/end",
        end_body(summary="Alice prefers email.", source_text=source),
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["summary"]["check"]["material"] is True


# --- X-Request-Id -------------------------------------------------------------


def _end_session_entry(support_bot: AgentPersona, **headers: str) -> tuple[Any, AuditEntry]:
    response = support_bot.client.post("/api/v1/sessions/s-1/end", end_body(), format="json", headers=headers)
    assert response.status_code == 200, response.content
    return response, AuditEntry.objects.filter(action="session.ended").get()


def test_an_overlong_request_id_is_replaced_not_a_500(support_bot):
    response, entry = _end_session_entry(support_bot, **{"X-Request-Id": "r" * 65})
    ours = response["X-Request-Id"]
    assert ours != "r" * 65 and len(ours) == 32
    assert entry.request_id == ours


@pytest.mark.parametrize("hostile", ["<script>", "a b", "id\u00e9", "x" * 10_000])
def test_request_ids_outside_the_safe_charset_are_replaced(support_bot, hostile):
    response, entry = _end_session_entry(support_bot, **{"X-Request-Id": hostile})
    assert response["X-Request-Id"] != hostile
    assert entry.request_id == response["X-Request-Id"]


def test_a_clients_request_id_is_echoed_and_recorded_as_the_clients(support_bot):
    client_id = "trace-" + "7" * 58  # 64 characters
    response, entry = _end_session_entry(support_bot, **{"X-Request-Id": client_id})
    assert response["X-Request-Id"] == client_id
    assert entry.request_id == f"client:{client_id}"


def test_a_forged_review_cursor_nested_thousands_deep_is_400(project, reviewer):
    token = base64.urlsafe_b64encode(("[" * 5_000 + "]" * 5_000).encode()).decode().rstrip("=")
    response = token_client(reviewer).get("/api/v1/admin/reviews", {"cursor": token})
    assert list(error_of(response, 400)["fields"]) == ["cursor"]


def test_a_lost_database_answers_503_with_retry_after_in_the_error_shape():
    # The end-to-end case (PostgreSQL stopped under load) is tests/bench/test_soak.py;
    # here the handler's answer itself, for the error Django raises on a lost connection.
    from django.db import InterfaceError, OperationalError

    from governance.api.errors import exception_handler

    for exc in (OperationalError("connection to server failed"), InterfaceError("connection already closed")):
        response = exception_handler(exc, {})
        assert response is not None
        assert (response.status_code, response["Retry-After"]) == (503, "5")
        assert response.data["error"]["code"] == "unavailable"
        assert "Idempotency-Key" in response.data["error"]["message"]
