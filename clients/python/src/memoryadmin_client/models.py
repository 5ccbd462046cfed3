"""Typed answers of the agent API.

Each model reads the fields the contract names and keeps the whole JSON in ``raw``,
so a field the service adds later is never lost to a caller. The test
``tests/clients/test_python_client_schema.py`` checks these fields against
``/api/schema/`` so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _dt(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    detail: str
    category: str | None = None
    field: str | None = None
    evidence: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            check=str(data.get("check", "")),
            severity=str(data.get("severity", "")),
            detail=str(data.get("detail", "")),
            category=data.get("category"),
            field=data.get("field"),
            evidence=data.get("evidence"),
        )


@dataclass(frozen=True)
class FactRef:
    id: int
    status: str

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> FactRef | None:
        return cls(id=int(data["id"]), status=str(data["status"])) if data else None


@dataclass(frozen=True)
class Source:
    """Where a proposed memory came from, as the agent said."""

    type: str
    ref: str
    observed_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Source:
        return cls(
            type=str(data.get("type", "")),
            ref=str(data.get("ref", "")),
            observed_at=_dt(data.get("observed_at")),
        )


@dataclass(frozen=True)
class FactSource(Source):
    """A fact's source, with who wrote it (agent:<slug>, user:<name>...)."""

    writer: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FactSource:
        return cls(
            type=str(data.get("type", "")),
            ref=str(data.get("ref", "")),
            observed_at=_dt(data.get("observed_at")),
            writer=str(data.get("writer") or ""),
        )


@dataclass(frozen=True)
class WriteResult:
    """The answer to ``POST /api/v1/writes``: what became of the proposed memory."""

    id: int
    status: str  # active | pending_review | quarantined | rejected
    fact: FactRef | None
    findings: list[Finding]
    supersedes: list[int]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def accepted(self) -> bool:
        return self.status == "active"

    @property
    def pending_review(self) -> bool:
        return self.status == "pending_review"

    @property
    def quarantined(self) -> bool:
        return self.status == "quarantined"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WriteResult:
        return cls(
            id=int(data["id"]),
            status=str(data["status"]),
            fact=FactRef.from_json(data.get("fact")),
            findings=[Finding.from_json(f) for f in data.get("findings") or []],
            supersedes=[int(i) for i in data.get("supersedes") or []],
            raw=data,
        )


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str
    reviewer: str
    statement: str | None
    created_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Decision:
        return cls(
            action=str(data.get("action", "")),
            reason=str(data.get("reason", "")),
            reviewer=str(data.get("reviewer", "")),
            statement=data.get("statement"),
            created_at=_dt(data.get("created_at")),
        )


@dataclass(frozen=True)
class Write:
    """``GET /api/v1/writes/{id}``: the write, its findings, its decisions, its fact."""

    id: int
    status: str
    principal: str | None
    kind: str
    key: str | None
    statement: str
    source: Source
    authority: int | None
    findings: list[Finding]
    decisions: list[Decision]
    fact: FactRef | None
    supersedes: list[int]
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Write:
        return cls(
            id=int(data["id"]),
            status=str(data["status"]),
            principal=data.get("principal"),
            kind=str(data.get("kind", "")),
            key=data.get("key"),
            statement=str(data.get("statement", "")),
            source=Source.from_json(data.get("source") or {}),
            authority=data.get("authority"),
            findings=[Finding.from_json(f) for f in data.get("findings") or []],
            decisions=[Decision.from_json(d) for d in data.get("decisions") or []],
            fact=FactRef.from_json(data.get("fact")),
            supersedes=[int(i) for i in data.get("supersedes") or []],
            created_at=_dt(data.get("created_at")),
            raw=data,
        )


@dataclass(frozen=True)
class RetrievedItem:
    fact_id: int
    statement: str
    kind: str
    source_type: str
    source_ref: str
    authority: int
    age_days: int
    tier: str  # recent | confirm
    tokens: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RetrievedItem:
        return cls(
            fact_id=int(data["fact_id"]),
            statement=str(data.get("statement", "")),
            kind=str(data.get("kind", "")),
            source_type=str(data.get("source_type", "")),
            source_ref=str(data.get("source_ref", "")),
            authority=int(data.get("authority") or 0),
            age_days=int(data.get("age_days") or 0),
            tier=str(data.get("tier", "")),
            tokens=int(data.get("tokens") or 0),
        )


@dataclass(frozen=True)
class Retrieval:
    """The answer to ``POST /api/v1/retrieve``; ``context`` is the exact text to inject."""

    retrieval_id: int
    mode: str  # resume | confirm | new
    context: str
    items: list[RetrievedItem]
    tokens_used: int
    token_budget: int
    policy_version: int
    candidates: int
    excluded: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Retrieval:
        return cls(
            retrieval_id=int(data["retrieval_id"]),
            mode=str(data.get("mode", "")),
            context=str(data.get("context", "")),
            items=[RetrievedItem.from_json(i) for i in data.get("items") or []],
            tokens_used=int(data.get("tokens_used") or 0),
            token_budget=int(data.get("token_budget") or 0),
            policy_version=int(data.get("policy_version") or 0),
            candidates=int(data.get("candidates") or 0),
            excluded=int(data.get("excluded") or 0),
            raw=data,
        )


@dataclass(frozen=True)
class Candidate:
    fact_id: int
    decision: str  # selected | excluded
    reason: str
    scores: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        return cls(
            fact_id=int(data["fact_id"]),
            decision=str(data.get("decision", "")),
            reason=str(data.get("reason") or ""),
            scores=dict(data.get("scores") or {}),
        )


@dataclass(frozen=True)
class RetrievalEvent:
    """``GET /api/v1/retrievals/{id}``: the full event and why each candidate was or was not used."""

    retrieval_id: int
    principal: str | None
    session: str | None
    round: int
    query: str
    mode: str
    context: str
    tokens_used: int
    token_budget: int
    policy_version: int
    candidates: list[Candidate]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RetrievalEvent:
        return cls(
            retrieval_id=int(data["retrieval_id"]),
            principal=data.get("principal"),
            session=data.get("session"),
            round=int(data.get("round") or 1),
            query=str(data.get("query", "")),
            mode=str(data.get("mode", "")),
            context=str(data.get("context", "")),
            tokens_used=int(data.get("tokens_used") or 0),
            token_budget=int(data.get("token_budget") or 0),
            policy_version=int(data.get("policy_version") or 0),
            candidates=[Candidate.from_json(c) for c in data.get("candidates") or []],
            raw=data,
        )


def _fact_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": int(data["id"]),
        "principal": data.get("principal"),
        "kind": str(data.get("kind", "")),
        "key": data.get("key"),
        "statement": str(data.get("statement", "")),
        "status": str(data.get("status", "")),
        "source": FactSource.from_json(data.get("source") or {}),
        "authority": int(data.get("authority") or 0),
        "confidence": str(data.get("confidence", "")),
        "valid_from": _dt(data.get("valid_from")),
        "valid_to": _dt(data.get("valid_to")),
        "recorded_at": _dt(data.get("recorded_at")),
        "last_verified_at": _dt(data.get("last_verified_at")),
        "age_days": int(data.get("age_days") or 0),
        "raw": data,
    }


@dataclass(frozen=True)
class Fact:
    """One fact with its provenance."""

    id: int
    principal: str | None
    kind: str
    key: str | None
    statement: str
    status: str
    source: FactSource
    authority: int
    confidence: str
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime | None
    last_verified_at: datetime | None
    age_days: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fact:
        return cls(**_fact_fields(data))


@dataclass(frozen=True)
class FactDetail(Fact):
    """``GET /api/v1/facts/{id}``: a fact and its neighbours in the supersession chain."""

    supersedes: list[int] = field(default_factory=list)
    superseded_by: list[int] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FactDetail:
        return cls(
            **_fact_fields(data),
            supersedes=[int(i) for i in data.get("supersedes") or []],
            superseded_by=[int(i) for i in data.get("superseded_by") or []],
        )


@dataclass(frozen=True)
class Memory(Fact):
    """A current memory about a person, with its freshness under the agent's policy."""

    tier: str = ""  # recent | confirm | stale
    plain_status: str = ""  # current | needs re-confirmation | outdated

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return cls(
            **_fact_fields(data),
            tier=str(data.get("tier") or ""),
            plain_status=str(data.get("plain_status") or ""),
        )


@dataclass(frozen=True)
class Memories:
    """``GET /api/v1/principals/{id}/memories``: what the agent currently believes about a person."""

    principal: str
    memories: list[Memory]
    counts: dict[str, int]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memories:
        return cls(
            principal=str(data.get("principal", "")),
            memories=[Memory.from_json(m) for m in data.get("memories") or []],
            counts={str(k): int(v) for k, v in (data.get("counts") or {}).items()},
            raw=data,
        )


@dataclass(frozen=True)
class Tombstone:
    id: int
    reason: str
    actor: str
    created_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tombstone:
        return cls(
            id=int(data["id"]),
            reason=str(data.get("reason", "")),
            actor=str(data.get("actor", "")),
            created_at=_dt(data.get("created_at")),
        )


@dataclass(frozen=True)
class Withdrawal:
    """``POST /api/v1/facts/{id}/withdraw``: the fact is withdrawn and a tombstone blocks it."""

    id: int
    status: str
    tombstone: Tombstone
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Withdrawal:
        return cls(
            id=int(data["id"]),
            status=str(data.get("status", "")),
            tombstone=Tombstone.from_json(data.get("tombstone") or {"id": 0}),
            raw=data,
        )


@dataclass(frozen=True)
class SummaryOutcome:
    write_id: int
    status: str
    fact: FactRef | None
    findings: list[Finding]

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> SummaryOutcome | None:
        if not data:
            return None
        return cls(
            write_id=int(data["write_id"]),
            status=str(data.get("status", "")),
            fact=FactRef.from_json(data.get("fact")),
            findings=[Finding.from_json(f) for f in data.get("findings") or []],
        )


@dataclass(frozen=True)
class SessionEnd:
    """``POST /api/v1/sessions/{id}/end``: the session is closed and its summary checked."""

    session: str
    ended_at: datetime | None
    resume_hint: str
    resume_hint_findings: list[Finding]
    slots_ended: int
    summary: SummaryOutcome | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionEnd:
        return cls(
            session=str(data.get("session", "")),
            ended_at=_dt(data.get("ended_at")),
            resume_hint=str(data.get("resume_hint") or ""),
            resume_hint_findings=[Finding.from_json(f) for f in data.get("resume_hint_findings") or []],
            slots_ended=int(data.get("slots_ended") or 0),
            summary=SummaryOutcome.from_json(data.get("summary")),
            raw=data,
        )


@dataclass(frozen=True)
class KeyInfo:
    """``GET /api/v1/key``: the agent, project and scopes of the calling key."""

    project: str
    agent: str
    key: str
    scopes: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    def may(self, scope: str) -> bool:
        return scope in self.scopes

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyInfo:
        return cls(
            project=str(data.get("project", "")),
            agent=str(data.get("agent", "")),
            key=str(data.get("key", "")),
            scopes=[str(s) for s in data.get("scopes") or []],
            raw=data,
        )
