"""The OpenAPI contract (issue 12 item 6): every operation typed, every error in one schema.

A generated client or a conformance fuzzer learns only what /api/schema/
says; an operation that answers ``{"type": "object", "additionalProperties": {}}``
or leaves out its errors teaches it nothing. These tests read the schema the
API serves and hold each operation to that, and check that the errors the API
really sends match the one error schema it documents.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.core.management import call_command
from django.test import Client

from tests.personas import AgentPersona, make_agent, token_client

pytestmark = pytest.mark.django_db

BODY_METHODS = {"post", "put", "patch"}
ERROR_REF = "#/components/schemas/Error"

# Nested values that are free-form by nature, each with why; anything else untyped fails.
FREE_FORM = {
    ("HistoryRow", "data"): "an audit entry's data: its keys depend on the action recorded",
    ("Job", "result"): "a finished job's report, documented in prose; its keys depend on the job kind",
}


@pytest.fixture
def schema(client: Client) -> dict[str, Any]:
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return name, schema["components"]["schemas"][name]
    return None, node


def is_untyped_object(node: dict[str, Any]) -> bool:
    return (
        node.get("type") == "object"
        and not node.get("properties")
        and node.get("additionalProperties") in ({}, True, None)
    ) or node == {}


def untyped_parts(schema: dict[str, Any], node: dict[str, Any], where: str, seen: set[str]) -> list[str]:
    """Every untyped object in a body, however deeply nested, except the documented free-form ones."""
    name, resolved = resolve(schema, node)
    if name is not None:
        if name in seen:
            return []
        seen = seen | {name}
        where = name
    if is_untyped_object(resolved):
        return [where]
    found: list[str] = []
    for prop, sub in resolved.get("properties", {}).items():
        if (where, prop) in FREE_FORM:
            continue
        found += untyped_parts(schema, sub, f"{where}.{prop}", seen)
    if isinstance(resolved.get("items"), dict):
        found += untyped_parts(schema, resolved["items"], f"{where}[]", seen)
    extra = resolved.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        found += untyped_parts(schema, extra, f"{where}{{}}", seen)
    for combinator in ("allOf", "oneOf", "anyOf"):
        for sub in resolved.get(combinator, []):
            found += untyped_parts(schema, sub, where, seen)
    return found


def test_the_schema_describes_every_api_operation(schema):
    ops = {(method.upper(), path) for method, path, _ in operations(schema)}
    # Every route of the API is in the schema (none hidden from generated clients).
    from governance.api.urls import urlpatterns

    routes = {"/api/v1/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(p.pattern)) for p in urlpatterns}
    assert routes == {path for _, path in ops}, sorted(routes ^ {path for _, path in ops})
    assert ("POST", "/api/v1/writes") in ops
    assert ("GET", "/api/v1/admin/audit/export") in ops


def test_every_request_and_response_body_is_typed(schema):
    problems = []
    for method, path, op in operations(schema):
        label = f"{method.upper()} {path}"
        if method in BODY_METHODS and "requestBody" in op:
            body = op["requestBody"]["content"]["application/json"]["schema"]
            problems += [f"{label} request: {part}" for part in untyped_parts(schema, body, "body", set())]
        for status, response in op["responses"].items():
            for media_type, content in response.get("content", {}).items():
                if media_type != "application/json":
                    continue
                found = untyped_parts(schema, content["schema"], "body", set())
                problems += [f"{label} {status}: {part}" for part in found]
    assert problems == []


def test_every_operation_documents_its_errors_in_the_one_error_schema(schema):
    problems = []
    for method, path, op in operations(schema):
        label = f"{method.upper()} {path}"
        expected = {"401", "403", "429"}
        if "{" in path:
            expected.add("404")
        if method in BODY_METHODS and "requestBody" in op:
            expected |= {"400", "413"}
        if any(p["in"] == "query" for p in op.get("parameters", [])):
            expected.add("400")
        responses = op["responses"]
        missing = expected - set(responses)
        if missing:
            problems.append(f"{label} lacks {sorted(missing)}")
        for status, response in responses.items():
            if not status.startswith("4"):
                continue
            content = response["content"]["application/json"]
            if content["schema"] != {"$ref": ERROR_REF}:
                problems.append(f"{label} {status} is not the error schema")
            if not content.get("examples"):
                problems.append(f"{label} {status} has no example")
            if not response.get("description"):
                problems.append(f"{label} {status} has no description")
    assert problems == []


def test_every_error_example_is_a_valid_error_body(schema):
    error = {**schema["components"]["schemas"]["Error"], "components": schema["components"]}
    for _, _, op in operations(schema):
        for status, response in op["responses"].items():
            if status.startswith("4"):
                for example in response["content"]["application/json"]["examples"].values():
                    jsonschema.validate(example["value"], _with_refs(error, schema))


def test_a_successful_response_is_documented_for_each_operation(schema):
    for method, path, op in operations(schema):
        assert any(status.startswith("2") for status in op["responses"]), f"{method} {path}"


def test_a_rate_limited_answer_documents_retry_after(schema):
    write = schema["paths"]["/api/v1/writes"]["post"]
    assert "Retry-After" in write["responses"]["429"]["headers"]


def _with_refs(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A component schema with its $refs resolvable by jsonschema (OpenAPI 3.0 nullable aside)."""
    return {**node, "components": schema["components"]}


@pytest.fixture
def error_validator(schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    root = {"$ref": ERROR_REF, "components": schema["components"]}
    return jsonschema.Draft7Validator(root)


def test_the_errors_the_api_really_sends_match_the_error_schema(
    error_validator, client, support_bot: AgentPersona, reviewer, settings
):
    reviewer_client = token_client(reviewer)
    answers = {
        401: client.get("/api/v1/writes/1"),
        404: support_bot.client.get("/api/v1/writes/999999"),
        400: support_bot.client.post("/api/v1/writes", {"kind": "nonsense"}, format="json"),
        403: reviewer_client.put(
            "/api/v1/admin/projects/acme/agents/support-bot/policy/draft", {}, format="json"
        ),
        413: support_bot.client.post(
            "/api/v1/writes", data="x" * (settings.API_MAX_BODY_BYTES + 1), content_type="application/json"
        ),
    }
    # A key of its own: the limit applies from its first request.
    settings.API_RATE_PER_MINUTE = 1
    limited = make_agent(support_bot.agent.project, "limited-bot")
    limited.client.get("/api/v1/writes/999999")
    answers[429] = limited.client.get("/api/v1/writes/999999")
    for status, response in answers.items():
        assert response.status_code == status, (status, response.content[:200])
        body = response.json()
        errors = [e.message for e in error_validator.iter_errors(body)]
        assert errors == [], (status, body, errors)
    assert answers[400].json()["error"]["fields"]["kind"]
    assert answers[429]["Retry-After"]


def test_the_schema_generates_without_warnings(tmp_path: Path):
    # drf-spectacular's own validation against the OpenAPI 3 meta-schema; any
    # warning (an unresolvable type, clashing enum names) fails the command.
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/v1/writes" in out.read_text()
