"""Shared steps for the policy and replay tests: memory written and retrieved through the agent API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from tests.personas import AgentPersona


def write(
    agent: AgentPersona,
    statement: str,
    *,
    principal: str | None = "alice",
    kind: str = "preference",
    key: str | None = None,
    days_ago: float = 0,
    ref: str | None = None,
    source: str = "user_statement",
    expect: str = "active",
) -> dict[str, Any]:
    """An agent write whose source was observed ``days_ago`` (so its R9 age starts there)."""
    observed = timezone.now() - timedelta(days=days_ago)
    response = agent.client.post(
        "/api/v1/writes",
        {
            "principal": principal,
            "kind": kind,
            "key": key,
            "statement": statement,
            "source": {
                "type": source,
                "ref": ref or f"chat:{statement[:20]}",
                "observed_at": observed.isoformat(),
            },
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == expect, body
    return body


def retrieve(
    agent: AgentPersona,
    *,
    principal: str | None = "alice",
    session: str | None = None,
    round: int = 1,
    query: str = "",
    identity_verified: bool = True,
) -> dict[str, Any]:
    response = agent.client.post(
        "/api/v1/retrieve",
        {
            "principal": principal,
            "session": session,
            "query": query,
            "round": round,
            "identity_verified": identity_verified,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()
