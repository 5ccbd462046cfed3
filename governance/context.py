"""Who is acting, for audit entries and history rows.

Set by the request middleware, the API authentication classes and the Celery
task hooks; read by ``governance.services.audit``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import pghistory


@dataclass(frozen=True)
class Actor:
    label: str
    user: Any = None
    request_id: str = ""


_current: ContextVar[Actor] = ContextVar("governance_actor", default=Actor("system"))  # noqa: B039 (Actor is frozen)


def current_actor() -> Actor:
    return _current.get()


@contextlib.contextmanager
def actor_scope(label: str, *, user: Any = None, request_id: str | None = None) -> Iterator[Actor]:
    actor = Actor(label, user, request_id if request_id is not None else _current.get().request_id)
    token = _current.set(actor)
    try:
        yield actor
    finally:
        _current.reset(token)


def set_actor(label: str, *, user: Any = None) -> None:
    """Replace the actor for the rest of the current request or task."""
    _current.set(Actor(label, user, _current.get().request_id))
    with contextlib.suppress(Exception):
        pghistory.context(actor=label)
