"""``Client`` and ``AsyncClient`` for the agent API: the same operations, blocking or awaited."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import datetime
from typing import Any, TypeVar

import httpx

from memoryadmin_client import _calls, models
from memoryadmin_client.errors import TransportError, error_for

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 3
# Answers that mean "not processed, try again later".
RETRY_STATUSES = frozenset({429, 503})
# Answers from a proxy that may come after the service did the work: retried only
# for calls the service recognises when repeated (reads, writes with their key).
RETRY_IF_REPLAYABLE = frozenset({502, 504})
MAX_RETRY_AFTER = 30.0


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _should_retry(call: _calls.Call[Any], status: int) -> bool:
    return status in RETRY_STATUSES or (call.replayable and status in RETRY_IF_REPLAYABLE)


def _transport_retryable(call: _calls.Call[Any], exc: httpx.TransportError) -> bool:
    # A request that never connected was never seen; anything later may have been.
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) or call.replayable


def _result(call: _calls.Call[T], response: httpx.Response) -> T:
    try:
        body: Any = response.json()
    except ValueError:
        body = {"error": {"code": "not_json", "message": response.text[:500]}}
    if response.is_success:
        return call.parse(body)
    raise error_for(response.status_code, body, retry_after=_retry_after(response))


class _Base:
    def __init__(
        self, base_url: str, api_key: str, *, retries: int, backoff: float, user_agent: str | None
    ) -> None:
        if not api_key:
            raise ValueError("An agent key is required (Authorization: Bearer <key>).")
        self.base_url = base_url.rstrip("/")
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            "User-Agent": user_agent or "memoryadmin-client/0.1",
        }

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        hinted = _retry_after(response) if response is not None else None
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER)
        # Exponential backoff with jitter, so many agents do not retry in step.
        return self.backoff * (2**attempt) * (0.5 + random.random() / 2)

    def _request_args(self, call: _calls.Call[Any]) -> dict[str, Any]:
        args: dict[str, Any] = {"headers": {**self._headers, **call.headers}}
        if call.body is not None:
            args["json"] = call.body
        return args


class Client(_Base):
    """Blocking client. ``Client(base_url, api_key)``; use as a context manager or call ``close()``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
        user_agent: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries=retries, backoff=backoff, user_agent=user_agent)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _calls.Call[T]) -> T:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(call.method, call.path, **self._request_args(call))
            except httpx.TransportError as exc:
                if last or not _transport_retryable(call, exc):
                    raise TransportError(f"{call.method} {call.path}: {exc}") from exc
                time.sleep(self._delay(attempt, None))
                continue
            if not last and _should_retry(call, response.status_code):
                time.sleep(self._delay(attempt, response))
                continue
            return _result(call, response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    # --- the agent API -------------------------------------------------------

    def key_info(self) -> models.KeyInfo:
        """Which agent and project this key belongs to, and its scopes."""
        return self._send(_calls.key_info())

    def write(
        self,
        *,
        principal: str | None,
        statement: str,
        kind: str = "preference",
        source_type: str = "user_statement",
        source_ref: str = "chat",
        observed_at: datetime | str | None = None,
        key: str | None = None,
        authority: int | None = None,
        valid_from: datetime | str | None = None,
        valid_to: datetime | str | None = None,
        session: str | None = None,
        derived_from_retrieval: int | None = None,
        idempotency_key: str | None = None,
    ) -> models.WriteResult:
        """Propose a memory; the answer says whether it is active, waiting for review or held back."""
        return self._send(
            _calls.write(
                principal=principal,
                statement=statement,
                kind=kind,
                source_type=source_type,
                source_ref=source_ref,
                observed_at=observed_at,
                key=key,
                authority=authority,
                valid_from=valid_from,
                valid_to=valid_to,
                session=session,
                derived_from_retrieval=derived_from_retrieval,
                idempotency_key=idempotency_key,
            )
        )

    def get_write(self, write_id: int) -> models.Write:
        return self._send(_calls.get_write(write_id))

    def retrieve(
        self,
        *,
        principal: str | None,
        query: str = "",
        session: str | None = None,
        round: int = 1,
        identity_verified: bool = True,
    ) -> models.Retrieval:
        """Governed retrieval: ``.context`` is the exact text to inject into the prompt."""
        return self._send(
            _calls.retrieve(
                principal=principal,
                query=query,
                session=session,
                round=round,
                identity_verified=identity_verified,
            )
        )

    def get_retrieval(self, retrieval_id: int) -> models.RetrievalEvent:
        return self._send(_calls.get_retrieval(retrieval_id))

    def memories(self, principal: str) -> models.Memories:
        return self._send(_calls.memories(principal))

    def get_fact(self, fact_id: int) -> models.FactDetail:
        return self._send(_calls.get_fact(fact_id))

    def withdraw(self, fact_id: int, *, principal: str, reason: str) -> models.Withdrawal:
        """Withdraw a fact on the request of the person it is about (needs the forget scope)."""
        return self._send(_calls.withdraw(fact_id, principal=principal, reason=reason))

    def end_session(
        self,
        session: str,
        *,
        principal: str,
        summary: str,
        resume_hint: str = "",
        first_event: str,
        last_event: str,
        source_text: str | None = None,
    ) -> models.SessionEnd:
        return self._send(
            _calls.end_session(
                session,
                principal=principal,
                summary=summary,
                resume_hint=resume_hint,
                first_event=first_event,
                last_event=last_event,
                source_text=source_text,
            )
        )


class AsyncClient(_Base):
    """The same operations as ``Client``, awaited; ``async with AsyncClient(url, key) as memory:``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.25,
        user_agent: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries=retries, backoff=backoff, user_agent=user_agent)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _calls.Call[T]) -> T:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._http.request(call.method, call.path, **self._request_args(call))
            except httpx.TransportError as exc:
                if last or not _transport_retryable(call, exc):
                    raise TransportError(f"{call.method} {call.path}: {exc}") from exc
                await asyncio.sleep(self._delay(attempt, None))
                continue
            if not last and _should_retry(call, response.status_code):
                await asyncio.sleep(self._delay(attempt, response))
                continue
            return _result(call, response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def write(
        self,
        *,
        principal: str | None,
        statement: str,
        kind: str = "preference",
        source_type: str = "user_statement",
        source_ref: str = "chat",
        observed_at: datetime | str | None = None,
        key: str | None = None,
        authority: int | None = None,
        valid_from: datetime | str | None = None,
        valid_to: datetime | str | None = None,
        session: str | None = None,
        derived_from_retrieval: int | None = None,
        idempotency_key: str | None = None,
    ) -> models.WriteResult:
        return await self._send(
            _calls.write(
                principal=principal,
                statement=statement,
                kind=kind,
                source_type=source_type,
                source_ref=source_ref,
                observed_at=observed_at,
                key=key,
                authority=authority,
                valid_from=valid_from,
                valid_to=valid_to,
                session=session,
                derived_from_retrieval=derived_from_retrieval,
                idempotency_key=idempotency_key,
            )
        )

    async def key_info(self) -> models.KeyInfo:
        return await self._send(_calls.key_info())

    async def get_write(self, write_id: int) -> models.Write:
        return await self._send(_calls.get_write(write_id))

    async def retrieve(
        self,
        *,
        principal: str | None,
        query: str = "",
        session: str | None = None,
        round: int = 1,
        identity_verified: bool = True,
    ) -> models.Retrieval:
        return await self._send(
            _calls.retrieve(
                principal=principal,
                query=query,
                session=session,
                round=round,
                identity_verified=identity_verified,
            )
        )

    async def get_retrieval(self, retrieval_id: int) -> models.RetrievalEvent:
        return await self._send(_calls.get_retrieval(retrieval_id))

    async def memories(self, principal: str) -> models.Memories:
        return await self._send(_calls.memories(principal))

    async def get_fact(self, fact_id: int) -> models.FactDetail:
        return await self._send(_calls.get_fact(fact_id))

    async def withdraw(self, fact_id: int, *, principal: str, reason: str) -> models.Withdrawal:
        return await self._send(_calls.withdraw(fact_id, principal=principal, reason=reason))

    async def end_session(
        self,
        session: str,
        *,
        principal: str,
        summary: str,
        resume_hint: str = "",
        first_event: str,
        last_event: str,
        source_text: str | None = None,
    ) -> models.SessionEnd:
        return await self._send(
            _calls.end_session(
                session,
                principal=principal,
                summary=summary,
                resume_hint=resume_hint,
                first_event=first_event,
                last_event=last_event,
                source_text=source_text,
            )
        )
