"""The OpenAPI schema and its documentation page answer."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_openapi_schema_and_docs_answer(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/writes" in schema.content
    assert client.get("/api/docs/").status_code == 200
