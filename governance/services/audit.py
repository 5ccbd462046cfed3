"""Appending to the hash-chained audit trail (R15), and sealing what was appended.

Every service that changes state calls ``record`` inside its own transaction,
so the entry commits or rolls back with the change it describes. ``record`` is
one INSERT: the entry is appended *unsealed* (no sequence, no hashes), without
a lock and without reading its predecessor, so writers of one project never
wait for each other's commits (issue 13).

``seal`` then gives a chain's committed unsealed entries, oldest id first, the
next sequence numbers and their hashes, under the chain's advisory lock, which
only sealers take. It runs shortly after each commit that recorded entries (a
Celery task, one per project for the commits a process makes within
``TASK_GATHER_MS``: ``governance/gathering.py``), every ``AUDIT_SEAL_SECONDS``
for every chain (beat, the safety net when a task was lost), and synchronously before anything reads the chain
(verification, checkpoints, the export, an erasure receipt). The change feed
announces entries as they are sealed, so it carries them in chain order with
their place in it. How an entry is hashed, and what breaks a chain, is
``rules/audit.py``; checking a stored chain is a read
(``selectors/audit.verify_chain``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict, Unpack

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Count, Min, Q
from django.utils import timezone

from governance import rls
from governance.context import current_actor
from governance.gathering import Gathering
from governance.models import AuditEntry, Project
from governance.rules.audit import GENESIS, entry_digest
from governance.services import feed

# pg_advisory_xact_lock(namespace, project id) makes one sealer at a time per
# project's chain (writers no longer take it). The namespace is an arbitrary
# constant that only has to differ from the other advisory locks' first key
# (services/replay.py); the database function governance_seal_audit_entries
# (migration 0038_audit_sealed_in_batches) takes the same lock with this
# number spelled out, so the two must never drift
# (tests/governance/services/test_audit.py).
AUDIT_CHAIN_LOCK_NAMESPACE = 8_675_309
# Entries sealed per transaction: a backlog (a worker was down for an hour) is
# sealed in several short transactions rather than one long one.
SEAL_BATCH = 2000


class EntryDetails(TypedDict, total=False):
    """What an entry says besides its action and object (all optional)."""

    reason: str
    data: dict[str, Any] | None
    actor: str | None  # default: the request's actor (governance.context)
    actor_user: Any


def record(
    project: Project | None, action: str, obj: models.Model | tuple[str, Any], **details: Unpack[EntryDetails]
) -> AuditEntry:
    """Append ``next_entry`` to the trail now, unsealed; it is sealed after the transaction commits."""
    # The trail is the system's: an entry without a project is appended from a
    # request scoped to some projects too (row-level security, governance.rls).
    with rls.every_project():
        entry = next_entry(project, action, obj, **details)
        entry.save(force_insert=True)
    seal_after_commit(entry.project_id)
    return entry


def record_sealed(
    project: Project | None, action: str, obj: models.Model | tuple[str, Any], **details: Unpack[EntryDetails]
) -> AuditEntry:
    """``record``, then seal the chain in this transaction, so the entry has its sequence and hash
    now (an erasure receipt names them). The chain's sealers wait until this transaction ends:
    call it as the last step of a transaction, not at the start of a long one."""
    entry = record(project, action, obj, **details)
    seal(entry.project_id)
    entry.refresh_from_db(fields=["sequence", "previous_hash", "entry_hash"])
    return entry


# Chains whose sealing waits for the end of a ``one_seal_per_chain`` block.
_held_seals: ContextVar[set[int | None] | None] = ContextVar("governance_held_seals", default=None)


@contextlib.contextmanager
def one_seal_per_chain() -> Iterator[None]:
    """Inside one transaction, queue one seal per chain for the whole block instead of one per
    entry (a batch of writes: 500 hand-offs to the broker were a fifth of its time).

    The seals are queued at the end of the block, outside any savepoint opened in it, so an
    entry whose savepoint was rolled back leaves at most a seal that finds nothing to do.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("one_seal_per_chain belongs inside the transaction whose entries it seals.")
    held: set[int | None] = set()
    token = _held_seals.set(held)
    try:
        yield
    finally:
        _held_seals.reset(token)
    for project_id in sorted(held, key=lambda p: p or 0):
        seal_after_commit(project_id)


def seal_after_commit(project_id: int | None) -> None:
    """Queue the sealing of ``project_id``'s chain for when this transaction commits."""
    held = _held_seals.get()
    if held is not None:
        held.add(project_id)
        return
    # One task per entry, not one per transaction: a task that finds its entry
    # sealed by an earlier one costs three short statements, and a callback
    # list shared across savepoints is not ours to deduplicate.
    # Robust: the change has committed; a broker that is down must not turn it
    # into an error. The beat's sweep seals what no task was queued for.
    # (A function, not a partial: Django names the callback when it logs a failure.)
    transaction.on_commit(lambda: _enqueue_seal(project_id), robust=True)


def _send_seals(project_ids: list[int | None]) -> None:
    from governance.tasks import seal_audit_chain  # governance.tasks imports the services

    for project_id in project_ids:
        seal_audit_chain.delay(project_id)


# One seal per project for all the commits of a moment (governance/gathering.py).
_seals: Gathering[int | None] = Gathering("audit seal", _send_seals)


def _enqueue_seal(project_id: int | None) -> None:
    _seals.add(project_id)


def change_field(
    project: Project | None,
    action: str,
    obj: models.Model,
    field: str,
    value: Any,
    *,
    reason: str,
    actor_user: Any = None,
    data: dict[str, Any] | None = None,
) -> AuditEntry:
    """Set one field of ``obj``, save it, and ``record`` the change with what the field was
    ("from") and is now ("to"); ``data`` adds to what the entry says."""
    _refuse_outside_a_transaction()  # before the save: a change is never saved without its entry
    previous = getattr(obj, field)
    setattr(obj, field, value)
    obj.save(update_fields=[field])
    return record(
        project,
        action,
        obj,
        reason=reason,
        actor_user=actor_user,
        data={"from": previous, "to": value, **(data or {})},
    )


def _refuse_outside_a_transaction() -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("Audit entries are written inside the transaction of the change they record.")


def next_entry(
    project: Project | None,
    action: str,
    obj: models.Model | tuple[str, Any],
    *,
    reason: str = "",
    data: dict[str, Any] | None = None,
    actor: str | None = None,
    actor_user: Any = None,
) -> AuditEntry:
    """A new entry of ``project``'s trail, unsealed and not yet saved. ``record`` saves it;
    erasure hands it to the database function that saves it (services.history.open_erasure)."""
    _refuse_outside_a_transaction()
    if isinstance(obj, tuple):
        object_type, object_id = obj
    else:
        object_type, object_id = obj._meta.model_name or type(obj).__name__.lower(), obj.pk
    who = current_actor()
    user = actor_user if actor_user is not None else who.user
    return AuditEntry(
        project=project,
        sequence=None,
        actor=actor or who.label,
        actor_user=user if getattr(user, "pk", None) else None,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        reason=reason,
        data=json.loads(json.dumps(data or {}, default=str)),
        request_id=who.request_id,
        created_at=timezone.now(),
        previous_hash="",
        entry_hash="",
    )


# --- Sealing ----------------------------------------------------------------------


def _chain(project_id: int | None) -> Q:
    """One chain's rows: entries without a project form a chain of their own."""
    return Q(project__isnull=True) if project_id is None else Q(project_id=project_id)


def seal(project_id: int | None) -> int:
    """Seal the committed unsealed entries of ``project_id``'s chain (and this transaction's own),
    oldest id first; how many. Entries committed meanwhile are left for the next call."""
    total = 0
    while True:
        with transaction.atomic(), rls.every_project():
            sealed = _seal_batch(project_id)
        total += sealed
        if sealed < SEAL_BATCH:
            return total


def _seal_batch(project_id: int | None) -> int:
    with connection.cursor() as cursor:
        # Held until this transaction ends: a second sealer reads the head
        # only after this one's links have committed.
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [AUDIT_CHAIN_LOCK_NAMESPACE, project_id or 0])
    chain = AuditEntry.objects.filter(_chain(project_id))
    sealed = chain.filter(sequence__isnull=False)
    head = sealed.order_by("-sequence").values_list("sequence", "entry_hash").first()
    entries = list(chain.filter(sequence__isnull=True).order_by("id")[:SEAL_BATCH])
    if not entries:
        return 0
    sequence, previous = (int(head[0] or 0), head[1]) if head is not None else (0, GENESIS)
    for entry in entries:
        sequence += 1
        entry.sequence, entry.previous_hash = sequence, previous
        entry.entry_hash = previous = entry_digest(entry)
    with connection.cursor() as cursor:
        # The one door: the database assigns the same sequence numbers and
        # links (from its own reading of the head, under the same lock) and
        # refuses an entry that is sealed already.
        cursor.execute(
            "SELECT governance_seal_audit_entries(%s, %s, %s)",
            [project_id, [e.pk for e in entries], [e.entry_hash for e in entries]],
        )
    _announce(entries, project_id)
    return len(entries)


def _announce(entries: list[AuditEntry], project_id: int | None) -> None:
    """The change feed's events for these newly sealed entries, in chain order."""
    project = None
    for entry in entries:
        if not feed.announced(entry):
            continue
        if project is None and project_id is not None:
            project = Project.objects.get(pk=project_id)
        feed.announce_audit_entry(entry, project)


def seal_all() -> int:
    """Seal every chain that has committed unsealed entries (the beat's safety net); how many."""
    with rls.every_project():
        chains = list(
            AuditEntry.objects.filter(sequence__isnull=True)
            .order_by()
            .values_list("project_id", flat=True)
            .distinct()
        )
    return sum(seal(project_id) for project_id in chains)


@dataclass(frozen=True)
class Backlog:
    """Committed entries not sealed yet, and when the oldest of them was recorded."""

    entries: int
    oldest: datetime | None

    @property
    def overdue(self) -> bool:
        """Older than sealing ever takes while the worker and beat run (docs/operations.md)."""
        return self.oldest is not None and timezone.now() - self.oldest > overdue_after()


def overdue_after() -> timedelta:
    return timedelta(seconds=settings.AUDIT_SEAL_OVERDUE_SECONDS)


def backlog(project_id: int | None = None, *, only_project: bool = False) -> Backlog:
    """What is waiting to be sealed, in every chain or (``only_project``) in one."""
    entries = AuditEntry.objects.filter(sequence__isnull=True)
    if only_project:
        entries = entries.filter(_chain(project_id))
    with rls.every_project():
        row = entries.aggregate(entries=Count("id"), oldest=Min("created_at"))
    return Backlog(row["entries"], row["oldest"])


def backlog_warning(waiting: Backlog) -> str:
    """Plain words for a backlog that waited too long; empty when it did not."""
    if not waiting.overdue or waiting.oldest is None:
        return ""
    minutes = max(1, int((timezone.now() - waiting.oldest).total_seconds() // 60))
    return (
        f"{waiting.entries} audit {'entry was' if waiting.entries == 1 else 'entries were'} still waiting "
        f"to be added to the chain, the oldest recorded {minutes} minute{'s' if minutes != 1 else ''} ago. "
        "Entries are normally added within seconds: check that the background worker and its "
        "scheduler are running. They have been added now and were checked with the rest."
    )
