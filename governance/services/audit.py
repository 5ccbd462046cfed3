"""Appending to the hash-chained audit trail (R15).

Every service that changes state calls ``record`` inside its own transaction,
so the entry commits or rolls back with the change it describes. How an entry
is hashed, and what breaks a chain, is ``rules/audit.py``; checking a stored
chain is a read (``selectors/audit.verify_chain``).
"""

from __future__ import annotations

import json
from typing import Any, TypedDict, Unpack

from django.db import connection, models, transaction
from django.utils import timezone

from governance import rls
from governance.context import current_actor
from governance.models import AuditEntry, Project
from governance.rules.audit import GENESIS, entry_digest
from governance.services import feed

# pg_advisory_xact_lock(namespace, project id) serialises the writers of one
# project's chain. The namespace is an arbitrary constant that only has to
# differ from the other advisory locks' first key (services/replay.py); the
# database function governance_open_erasure (migration 0024_a_database_guards)
# writes audit entries too and takes the same lock with this number spelled
# out, so the two must never drift (tests/governance/services/test_audit.py).
AUDIT_CHAIN_LOCK_NAMESPACE = 8_675_309


class EntryDetails(TypedDict, total=False):
    """What an entry says besides its action and object (all optional)."""

    reason: str
    data: dict[str, Any] | None
    actor: str | None  # default: the request's actor (governance.context)
    actor_user: Any


def record(
    project: Project | None, action: str, obj: models.Model | tuple[str, Any], **details: Unpack[EntryDetails]
) -> AuditEntry:
    """Append ``next_entry`` to the chain now, with its change-feed row."""
    # The trail is the system's: an entry without a project is appended from a
    # request scoped to some projects too (row-level security, governance.rls).
    with rls.every_project():
        entry = next_entry(project, action, obj, **details)
        entry.save(force_insert=True)
        # The change feed's outbox row commits (or not) with this entry.
        feed.announce_audit_entry(entry, project)
    return entry


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
    """The next link of ``project``'s chain, hashed and not yet saved; the chain stays locked
    until the transaction ends. ``record`` saves it; erasure hands it to the database function
    that saves it (governance.services.history.open_erasure)."""
    _refuse_outside_a_transaction()
    if isinstance(obj, tuple):
        object_type, object_id = obj
    else:
        object_type, object_id = obj._meta.model_name or type(obj).__name__.lower(), obj.pk
    who = current_actor()
    user = actor_user if actor_user is not None else who.user
    # One writer at a time per project's chain: the advisory lock lasts until
    # the transaction ends, so the next entry sees this one as its predecessor.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", [AUDIT_CHAIN_LOCK_NAMESPACE, project.pk if project else 0]
        )
    with rls.every_project():
        last = (
            AuditEntry.objects.filter(project=project)
            .order_by("-sequence")
            .values("sequence", "entry_hash")
            .first()
        )
    entry = AuditEntry(
        project=project,
        sequence=(last["sequence"] + 1) if last else 1,
        actor=actor or who.label,
        actor_user=user if getattr(user, "pk", None) else None,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        reason=reason,
        data=json.loads(json.dumps(data or {}, default=str)),
        request_id=who.request_id,
        created_at=timezone.now(),
        previous_hash=last["entry_hash"] if last else GENESIS,
    )
    entry.entry_hash = entry_digest(entry)
    return entry
