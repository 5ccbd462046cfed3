"""An MCP server over the agent API: remember, recall, forget, what_do_you_know_about.

Built with the official ``mcp`` SDK. Over stdio the agent key comes from
``MEMORY_API_KEY``; over Streamable HTTP each caller presents its own agent key as a
bearer token, which is checked against the agent API (``GET /api/v1/key``) and then
used for that caller's requests, so one server can serve many agents and each sees
only what its key may see.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import memoryadmin_client as mc
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

INSTRUCTIONS = (
    "Long-term memory about the people you talk to, governed by the memory service. "
    "Call recall at the start of a conversation and when the topic changes, and inject "
    "its context as given: every line carries its source and age. Call remember when the "
    "person states something durable about themselves; the service may hold a memory for "
    "a reviewer or refuse it, and says so. Call forget when the person asks you to."
)

STATUS_WORDS = {
    "active": "Remembered",
    "pending_review": "Held for a reviewer: not used until a person approves it",
    "quarantined": "Not remembered: held back (quarantined) because it looks unsafe",
    "rejected": "Not remembered: refused",
}


@dataclass(frozen=True)
class Endpoint:
    """Where the agent API is, and the key used when the caller brings none (stdio)."""

    url: str
    key: str | None
    timeout: float = 10.0


def _describe_findings(findings: list[mc.Finding]) -> str:
    return "; ".join(f.detail for f in findings if f.detail)


def describe_write(result: mc.WriteResult) -> str:
    words = STATUS_WORDS.get(result.status, result.status)
    parts = [f"{words}."]
    if result.fact is not None:
        parts.append(f"Fact {result.fact.id}, write {result.id}.")
    else:
        parts.append(f"Write {result.id}.")
    if result.supersedes:
        parts.append("It replaces fact " + ", ".join(str(i) for i in result.supersedes) + ".")
    details = _describe_findings(result.findings)
    if details:
        parts.append(f"Why: {details}")
    return " ".join(parts)


def describe_memories(memories: mc.Memories) -> str:
    if not memories.memories:
        return f"Nothing is remembered about {memories.principal}."
    lines = [f"What is remembered about {memories.principal}:"]
    for fact in memories.memories:
        tier = {"recent": "current", "confirm": "re-confirm before relying on it", "stale": "outdated"}.get(
            fact.tier or "", fact.tier or ""
        )
        lines.append(
            f"- [fact {fact.id}] {fact.statement} (source: {fact.source.type}, "
            f"{fact.age_days} days old{', ' + tier if tier else ''})"
        )
    return "\n".join(lines)


def explain_retrieval(event: mc.RetrievalEvent) -> dict[str, Any]:
    return {
        "retrieval_id": event.retrieval_id,
        "principal": event.principal,
        "session": event.session,
        "round": event.round,
        "mode": event.mode,
        "tokens_used": event.tokens_used,
        "token_budget": event.token_budget,
        "policy_version": event.policy_version,
        "candidates": [
            {"fact_id": c.fact_id, "decision": c.decision, "reason": c.reason} for c in event.candidates
        ],
        "context": event.context,
    }


def _tool_error(exc: mc.MemoryAdminError) -> ToolError:
    if isinstance(exc, mc.APIError):
        return ToolError(f"The memory service refused: {exc.message}")
    return ToolError(f"The memory service could not be reached: {exc}")


class AgentKeyVerifier:
    """Accepts a bearer token when the agent API accepts it as an agent key."""

    def __init__(self, endpoint: Endpoint, transport: Any = None) -> None:
        self.endpoint = endpoint
        self.transport = transport

    async def verify_token(self, token: str) -> AccessToken | None:
        async with mc.AsyncClient(
            self.endpoint.url, token, timeout=self.endpoint.timeout, retries=1, transport=self.transport
        ) as client:
            try:
                info = await client.key_info()
            except (mc.Unauthorized, mc.Forbidden, mc.NotFound):
                return None
        return AccessToken(token=token, client_id=f"{info.project}/{info.agent}", scopes=info.scopes)


def build_server(
    endpoint: Endpoint,
    *,
    http_url: str | None = None,
    client_factory: Callable[[str], mc.AsyncClient] | None = None,
) -> MCPServer:
    """The MCP server; ``http_url`` (where it is served) turns on bearer authentication."""

    def client_for_caller() -> mc.AsyncClient:
        token = get_access_token()
        key = token.token if token is not None else endpoint.key
        if not key:
            raise ToolError("No agent key: set MEMORY_API_KEY, or send one as a bearer token.")
        if client_factory is not None:
            return client_factory(key)
        return mc.AsyncClient(endpoint.url, key, timeout=endpoint.timeout)

    auth_options: dict[str, Any] = {}
    if http_url is not None:
        auth_options = {
            "token_verifier": AgentKeyVerifier(endpoint),
            # Agent keys are issued by the memory service itself, so it is the "issuer";
            # the verifier checks each key with it, no OAuth flow is involved.
            "auth": AuthSettings(
                issuer_url=endpoint.url,  # type: ignore[arg-type]  # pydantic coerces the str
                resource_server_url=http_url,  # type: ignore[arg-type]  # likewise
                validate_token_resource=False,
            ),
        }
    server = MCPServer(name="memory", instructions=INSTRUCTIONS, **auth_options)

    @server.tool()
    async def remember(
        principal: str, statement: str, kind: str = "preference", source_type: str = "user_statement"
    ) -> str:
        """Propose a long-term memory about a person (their external id). The service checks it and
        answers whether it was remembered, held for a reviewer, or refused, and why."""
        async with client_for_caller() as client:
            try:
                result = await client.write(
                    principal=principal,
                    statement=statement,
                    kind=kind,
                    source_type=source_type,
                    source_ref="mcp:remember",
                )
            except mc.MemoryAdminError as exc:
                raise _tool_error(exc) from exc
        return describe_write(result)

    @server.tool()
    async def recall(principal: str, query: str = "", session: str | None = None) -> str:
        """Governed memory about a person for the current conversation: the exact text to put in
        the prompt, within the agent's token budget. Pass the same session id for every call of one
        conversation."""
        async with client_for_caller() as client:
            try:
                retrieval = await client.retrieve(principal=principal, query=query, session=session)
            except mc.MemoryAdminError as exc:
                raise _tool_error(exc) from exc
        header = (
            f"(retrieval {retrieval.retrieval_id}: {len(retrieval.items)} memories, "
            f"{retrieval.tokens_used} of {retrieval.token_budget} tokens; "
            f"explanation at memory://retrievals/{retrieval.retrieval_id})"
        )
        return f"{retrieval.context}\n{header}" if retrieval.context else f"Nothing to recall. {header}"

    @server.tool()
    async def forget(fact_id: int, reason: str, principal: str | None = None) -> str:
        """Withdraw a memory because the person it is about asked; it will not be learned again.
        Needs a key allowed to forget. ``principal`` is the person's external id (looked up from
        the fact when not given)."""
        async with client_for_caller() as client:
            try:
                if principal is None:
                    owner = (await client.get_fact(fact_id)).principal
                    if owner is None:
                        raise ToolError(
                            "That memory is about the project, not a person; it cannot be "
                            "withdrawn on a person's request."
                        )
                    principal = owner
                withdrawn = await client.withdraw(fact_id, principal=principal, reason=reason)
            except mc.MemoryAdminError as exc:
                raise _tool_error(exc) from exc
        return f"Forgotten: fact {withdrawn.id} is withdrawn and will not be learned again."

    @server.tool()
    async def what_do_you_know_about(principal: str) -> str:
        """Everything currently remembered about a person, with sources and ages."""
        async with client_for_caller() as client:
            try:
                memories = await client.memories(principal)
            except mc.NotFound:
                return f"Nothing is remembered about {principal}."
            except mc.MemoryAdminError as exc:
                raise _tool_error(exc) from exc
        return describe_memories(memories)

    @server.resource(
        "memory://retrievals/{retrieval_id}",
        name="retrieval-explanation",
        description="Why each candidate memory was or was not used in one retrieval.",
        mime_type="application/json",
    )
    async def retrieval_explanation(retrieval_id: str) -> str:
        if not retrieval_id.isdigit():
            raise ResourceError("A retrieval id is a number.")
        async with client_for_caller() as client:
            try:
                event = await client.get_retrieval(int(retrieval_id))
            except mc.MemoryAdminError as exc:
                raise ResourceError(f"The memory service refused: {exc}") from exc
        return json.dumps(explain_retrieval(event), indent=2)

    return server
