"""A LangGraph ``BaseStore`` whose reads are governed retrievals and whose writes are proposals.

Install with ``pip install "memoryadmin-client[langgraph]"``.

Namespaces map to the agent API's nouns: ``(principal,)`` or ``(principal, kind)``,
where ``principal`` is the person's external id and ``kind`` one of the fact kinds
(``preference`` when not given). An item's key is the fact's key, so putting the
same key again supersedes the earlier value instead of overwriting it, and the
history stays in the service.

What differs from an ordinary store, on purpose:

- ``put`` proposes a memory. The service may make it active, hold it for a reviewer
  or refuse it; ``outcome(namespace, key)`` tells which, and with ``strict=True`` a
  put that is not active raises ``MemoryNotStored``.
- ``get`` and ``search`` see only what is active: a held or refused value is absent.
- ``search`` with a query is a governed retrieval (scope, freshness, authority floor,
  token budget); without one it lists what is currently remembered.
- ``put(..., None)`` (``delete``) withdraws the memory on the person's request,
  which needs a key with the forget scope; it will not be learned again.
- ``list_namespaces`` lists the namespaces this store has used: the agent API
  deliberately offers no directory of people.
- Values are statements: ``{"statement": ...}`` (``content``, ``text`` or ``memory``
  are accepted too), with optional ``source_type``, ``source_ref``, ``observed_at``
  and ``authority``. Any other field is refused rather than silently dropped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

import memoryadmin_client as mc

FACT_KINDS = frozenset({"preference", "profile", "episodic", "config", "slot", "summary"})
STATEMENT_FIELDS = ("statement", "content", "text", "memory")
OPTIONAL_FIELDS = frozenset({"source_type", "source_ref", "observed_at", "authority"})
DEFAULT_KIND = "preference"


class MemoryNotStored(Exception):
    """A put the service did not make active (``strict=True`` only); ``result`` says why."""

    def __init__(self, result: mc.WriteResult) -> None:
        self.result = result
        reasons = "; ".join(f.detail for f in result.findings) or "no reason given"
        super().__init__(f"Memory not stored as active ({result.status}): {reasons}")


def _where(namespace: tuple[str, ...]) -> tuple[str, str | None]:
    if not namespace or len(namespace) > 2:
        raise InvalidNamespaceError(
            f"Use (principal,) or (principal, kind) as the namespace, not {namespace!r}."
        )
    kind = namespace[1] if len(namespace) == 2 else None
    if kind is not None and kind not in FACT_KINDS:
        raise InvalidNamespaceError(f"Unknown kind {kind!r}; use one of {sorted(FACT_KINDS)}.")
    return namespace[0], kind


def _statement(value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    unknown = set(value) - set(STATEMENT_FIELDS) - OPTIONAL_FIELDS
    if unknown:
        raise ValueError(
            f"Governed memory stores statements; these fields would be lost: {sorted(unknown)}. "
            'Put {"statement": "..."} with optional source_type, source_ref, observed_at, authority.'
        )
    texts = [value[name] for name in STATEMENT_FIELDS if value.get(name)]
    if len(texts) != 1 or not isinstance(texts[0], str):
        raise ValueError('Give exactly one statement as text: {"statement": "..."}.')
    return texts[0], {name: value[name] for name in OPTIONAL_FIELDS if name in value}


def _item_value(fact: mc.Fact) -> dict[str, Any]:
    return {
        "statement": fact.statement,
        "kind": fact.kind,
        "fact_id": fact.id,
        "source_type": fact.source.type,
        "source_ref": fact.source.ref,
        "authority": fact.authority,
        "age_days": fact.age_days,
        "tier": getattr(fact, "tier", None) or None,
    }


def _item_key(fact_key: str | None, fact_id: int) -> str:
    return fact_key or f"fact-{fact_id}"


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return all(value.get(name) == expected for name, expected in (wanted or {}).items())


def _namespace_matches(namespace: tuple[str, ...], op: ListNamespacesOp) -> bool:
    for condition in op.match_conditions or ():
        path = tuple(condition.path)
        if len(path) > len(namespace):
            return False
        part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
        if any(p != "*" and p != label for p, label in zip(path, part, strict=True)):
            return False
    return True


class GovernedStore(BaseStore):
    """``GovernedStore(client)`` with a ``memoryadmin_client.Client`` holding an agent key."""

    def __init__(
        self,
        client: mc.Client,
        *,
        session: str | None = None,
        identity_verified: bool = True,
        source_ref: str = "langgraph:store",
        strict: bool = False,
    ) -> None:
        self.client = client
        self.session = session
        self.identity_verified = identity_verified
        self.source_ref = source_ref
        self.strict = strict
        self._outcomes: dict[tuple[tuple[str, ...], str], mc.WriteResult] = {}
        self._namespaces: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    # --- what the service said -------------------------------------------------

    def outcome(self, namespace: tuple[str, ...], key: str) -> mc.WriteResult | None:
        """The service's answer to the last put of this item by this store (active, held, refused)."""
        return self._outcomes.get((tuple(namespace), key))

    # --- BaseStore ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The shipped client is blocking; a worker thread keeps the event loop free.
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"Unknown store operation: {type(op).__name__}")

    def _seen(self, namespace: tuple[str, ...]) -> None:
        with self._lock:
            self._namespaces.add(tuple(namespace))

    def _remembered(self, principal: str) -> list[mc.Memory]:
        try:
            return self.client.memories(principal).memories
        except mc.NotFound:
            return []  # nobody by that id yet: nothing remembered

    def _get(self, op: GetOp) -> Item | None:
        principal, kind = _where(op.namespace)
        for fact in self._remembered(principal):
            if _item_key(fact.key, fact.id) == op.key and (kind is None or fact.kind == kind):
                return Item(
                    value=_item_value(fact),
                    key=op.key,
                    namespace=(principal, fact.kind),
                    created_at=fact.recorded_at or datetime.now(UTC),
                    updated_at=fact.last_verified_at or fact.recorded_at or datetime.now(UTC),
                )
        return None

    def _put(self, op: PutOp) -> None:
        principal, kind = _where(op.namespace)
        self._seen(op.namespace)
        if op.value is None:
            self._delete(principal, kind, op.key)
            return
        statement, extra = _statement(dict(op.value))
        result = self.client.write(
            principal=principal,
            statement=statement,
            kind=kind or DEFAULT_KIND,
            key=op.key,
            source_type=extra.get("source_type", "user_statement"),
            source_ref=extra.get("source_ref", self.source_ref),
            observed_at=extra.get("observed_at"),
            authority=extra.get("authority"),
            session=self.session if (kind or DEFAULT_KIND) == "slot" else None,
        )
        with self._lock:
            self._outcomes[(tuple(op.namespace), op.key)] = result
        if self.strict and not result.accepted:
            raise MemoryNotStored(result)

    def _delete(self, principal: str, kind: str | None, key: str) -> None:
        for fact in self._remembered(principal):
            if _item_key(fact.key, fact.id) == key and (kind is None or fact.kind == kind):
                self.client.withdraw(
                    fact.id, principal=principal, reason="Deleted through the LangGraph store."
                )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if not op.namespace_prefix:
            raise InvalidNamespaceError("Search within a person: namespace_prefix=(principal,).")
        principal, kind = _where(op.namespace_prefix)
        if op.query:
            found = self._retrieve(principal, op.query)
        else:
            found = [(fact, None) for fact in self._remembered(principal)]
        items = [
            SearchItem(
                namespace=(principal, fact.kind),
                key=_item_key(fact.key, fact.id),
                value=_item_value(fact),
                created_at=fact.recorded_at or datetime.now(UTC),
                updated_at=fact.last_verified_at or fact.recorded_at or datetime.now(UTC),
                score=score,
            )
            for fact, score in found
            if kind is None or fact.kind == kind
        ]
        items = [item for item in items if _matches(item.value, op.filter)]
        return items[op.offset : op.offset + op.limit]

    def _retrieve(self, principal: str, query: str) -> list[tuple[mc.Fact, float | None]]:
        retrieval = self.client.retrieve(
            principal=principal,
            query=query,
            session=self.session,
            identity_verified=self.identity_verified,
        )
        if not retrieval.items:
            return []
        scores = {
            c.fact_id: c.scores.get("total")
            for c in self.client.get_retrieval(retrieval.retrieval_id).candidates
        }
        by_id = {fact.id: fact for fact in self._remembered(principal)}
        # Injected items in the service's order; a slot or project fact that is not
        # among the person's memories is read on its own.
        return [
            (by_id.get(item.fact_id) or self.client.get_fact(item.fact_id), scores.get(item.fact_id))
            for item in retrieval.items
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        with self._lock:
            known = sorted(self._namespaces)
        found = [ns for ns in known if _namespace_matches(ns, op)]
        if op.max_depth is not None:
            found = sorted({ns[: op.max_depth] for ns in found})
        return found[op.offset : op.offset + op.limit]
