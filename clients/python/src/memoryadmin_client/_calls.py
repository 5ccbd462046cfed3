"""What each operation sends and how its answer is read: no I/O, shared by both clients."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from memoryadmin_client import models

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # A retry after the request may have reached the service is safe only when the
    # service would recognise it as the same request: reads, and writes with an
    # Idempotency-Key (the same key and body return the first response).
    replayable: bool = False


def _segment(value: str | int) -> str:
    # Ids are path segments: never let one reach another route ("../", "?").
    return quote(str(value), safe="")


def _iso(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("Give timezone-aware datetimes (the service cannot guess your zone).")
    return value.isoformat()


def write(
    *,
    principal: str | None,
    statement: str,
    kind: str,
    source_type: str,
    source_ref: str,
    observed_at: datetime | str | None,
    key: str | None,
    authority: int | None,
    valid_from: datetime | str | None,
    valid_to: datetime | str | None,
    session: str | None,
    derived_from_retrieval: int | None,
    idempotency_key: str | None,
) -> Call[models.WriteResult]:
    body: dict[str, Any] = {
        "principal": principal,
        "kind": kind,
        "statement": statement,
        "source": {
            "type": source_type,
            "ref": source_ref,
            "observed_at": _iso(observed_at) or datetime.now(UTC).isoformat(),
        },
    }
    optional = {
        "key": key,
        "authority": authority,
        "valid_from": _iso(valid_from),
        "valid_to": _iso(valid_to),
        "session": session,
        "derived_from_retrieval": derived_from_retrieval,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    # One key for every attempt of this call, so a retry cannot store the memory twice.
    headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
    return Call("POST", "/api/v1/writes", models.WriteResult.from_json, body, headers, replayable=True)


def get_write(write_id: int) -> Call[models.Write]:
    return Call("GET", f"/api/v1/writes/{_segment(write_id)}", models.Write.from_json, replayable=True)


def retrieve(
    *, principal: str | None, query: str, session: str | None, round: int, identity_verified: bool
) -> Call[models.Retrieval]:
    body = {
        "principal": principal,
        "session": session,
        "query": query,
        "round": round,
        "identity_verified": identity_verified,
    }
    return Call("POST", "/api/v1/retrieve", models.Retrieval.from_json, body)


def get_retrieval(retrieval_id: int) -> Call[models.RetrievalEvent]:
    return Call(
        "GET",
        f"/api/v1/retrievals/{_segment(retrieval_id)}",
        models.RetrievalEvent.from_json,
        replayable=True,
    )


def memories(principal: str) -> Call[models.Memories]:
    return Call(
        "GET",
        f"/api/v1/principals/{_segment(principal)}/memories",
        models.Memories.from_json,
        replayable=True,
    )


def get_fact(fact_id: int) -> Call[models.FactDetail]:
    return Call("GET", f"/api/v1/facts/{_segment(fact_id)}", models.FactDetail.from_json, replayable=True)


def withdraw(fact_id: int, *, principal: str, reason: str) -> Call[models.Withdrawal]:
    body = {"principal": principal, "reason": reason}
    return Call("POST", f"/api/v1/facts/{_segment(fact_id)}/withdraw", models.Withdrawal.from_json, body)


def end_session(
    session: str,
    *,
    principal: str,
    summary: str,
    resume_hint: str,
    first_event: str,
    last_event: str,
    source_text: str | None,
) -> Call[models.SessionEnd]:
    body: dict[str, Any] = {
        "principal": principal,
        "summary": summary,
        "resume_hint": resume_hint,
        "first_event": first_event,
        "last_event": last_event,
    }
    if source_text is not None:
        body["source_text"] = source_text
    return Call("POST", f"/api/v1/sessions/{_segment(session)}/end", models.SessionEnd.from_json, body)


def key_info() -> Call[models.KeyInfo]:
    return Call("GET", "/api/v1/key", models.KeyInfo.from_json, replayable=True)
