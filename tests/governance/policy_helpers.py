"""Shared steps for the policy and replay tests: memory written and retrieved through the agent API.

The requests are the personas' (tests/personas.py, AgentPersona.write / .retrieve); these
add the policy tests' conventions: a preference by default, a source reference per
statement, an observation ``days_ago`` (so its R9 age starts there) and no session.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.personas import AgentPersona


def write(
    agent: AgentPersona,
    statement: str,
    *,
    kind: str = "preference",
    days_ago: float = 0,
    ref: str | None = None,
    expect: str = "active",
    **fields: Any,
) -> dict[str, Any]:
    """An agent write whose source was observed ``days_ago``, expected to end ``expect``."""
    return agent.write(
        statement,
        kind=kind,
        ref=ref or f"chat:{statement[:20]}",
        age=timedelta(days=days_ago),
        status=expect,
        **fields,
    )


def retrieve(agent: AgentPersona, *, session: str | None = None, **fields: Any) -> dict[str, Any]:
    """A retrieval, without a session unless one is named."""
    return agent.retrieve(session, **fields)
