"""The client's models and the published OpenAPI schema cannot drift apart.

Every field a model reads must be a property the schema documents for that
operation's success response (nested models too), and every property the schema
marks required for the contract's core answers must be read by the model.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import memoryadmin_client.models as m
import pytest
from drf_spectacular.generators import SchemaGenerator

# (model, path, method, status)
OPERATIONS = [
    (m.WriteResult, "/api/v1/writes", "post", "201"),
    (m.Write, "/api/v1/writes/{write_id}", "get", "200"),
    (m.Retrieval, "/api/v1/retrieve", "post", "200"),
    (m.RetrievalEvent, "/api/v1/retrievals/{retrieval_id}", "get", "200"),
    (m.Memories, "/api/v1/principals/{external_id}/memories", "get", "200"),
    (m.FactDetail, "/api/v1/facts/{fact_id}", "get", "200"),
    (m.Withdrawal, "/api/v1/facts/{fact_id}/withdraw", "post", "200"),
    (m.SessionEnd, "/api/v1/sessions/{session_id}/end", "post", "200"),
    (m.KeyInfo, "/api/v1/key", "get", "200"),
]
# Answers whose every required property the client must read (the documented contract, docs/api.md).
COMPLETE = {m.WriteResult, m.Retrieval, m.RetrievedItem}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    if "allOf" in node and len(node["allOf"]) == 1:
        return resolve(schema, node["allOf"][0])
    return node


def nested_model(annotation: Any) -> type | None:
    """The dataclass a field holds (directly, in a list, or optional), if any."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    for arg in typing.get_args(annotation):
        inner = nested_model(arg)
        if inner is not None:
            return inner
    return None


def check(schema: dict[str, Any], model: type, node: dict[str, Any], where: str) -> list[str]:
    node = resolve(schema, node)
    if node.get("type") == "array":
        node = resolve(schema, node["items"])
    properties = node.get("properties") or {}
    problems = []
    if not properties:
        return [f"{where}: the schema documents no properties (an untyped object)"]
    hints = typing.get_type_hints(model)
    for field in dataclasses.fields(model):
        if field.name == "raw":
            continue
        if field.name not in properties:
            problems.append(f"{where}.{field.name}: read by the client, absent from the schema")
            continue
        inner = nested_model(hints[field.name])
        if inner is not None:
            problems += check(schema, inner, properties[field.name], f"{where}.{field.name}")
    if model in COMPLETE:
        read = {f.name for f in dataclasses.fields(model)}
        problems += [
            f"{where}.{name}: required by the schema, not read by the client"
            for name in node.get("required", [])
            if name not in read
        ]
    return problems


@pytest.mark.parametrize(
    ("model", "path", "method", "status"), OPERATIONS, ids=lambda v: getattr(v, "__name__", v)
)
def test_the_model_matches_the_schema(schema, model, path, method, status):
    operation = schema["paths"][path][method]
    body = operation["responses"][status]["content"]["application/json"]["schema"]
    assert check(schema, model, body, model.__name__) == []
