"""The one door through which erasure changes rows of append-only tables.

History rows (django-pghistory), review decisions and retrieval events refuse
UPDATE (R15); erasure (R8) is the one exception. The append-only triggers let
such an UPDATE through only in a transaction for which the database function
``governance_open_erasure`` (SECURITY DEFINER, owned by the owner role) has
recorded a grant, and that function writes the grant's audit entry itself, in
the same transaction. The application role cannot write grants any other way
(migration 0024_a_database_guards), so every erasure leaves an entry in the
hash-chained trail saying who opened it, on what, and why.

``open_erasure`` opens it for the rest of a transaction; ``erase_rows`` runs
one erasing statement (withdrawal and forgetting a person both use them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connection, models, transaction

from governance.models import AuditEntry, Project
from governance.services import audit


def erase_rows(statement: str, params: Sequence[Any] = ()) -> int:
    """Run one UPDATE that blanks erasable content in append-only rows; how many rows changed.

    ``statement`` is the service's own SQL (table and column names are
    constants, never input); values travel in ``params``. Inside the caller's
    transaction only: the exception must end with the erasure it belongs to.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("History is erased inside the transaction of the erasure it belongs to.")
    if not statement.lstrip().upper().startswith("UPDATE "):
        raise ValueError("Only UPDATE statements erase history; rows are never deleted.")
    # The database refuses it unless open_erasure opened this transaction.
    with connection.cursor() as cursor:
        cursor.execute(statement, list(params))
        changed = cursor.rowcount
    return max(changed, 0)


ACTION = "erasure.opened"


def open_erasure(
    project: Project | None,
    subject: models.Model | tuple[str, Any],
    *,
    reason: str,
    data: dict[str, Any] | None = None,
    actor: str | None = None,
    actor_user: Any = None,
) -> AuditEntry:
    """Allow erasing UPDATEs of history for the rest of the current transaction; its audit entry.

    Call it inside the transaction that erases, before the first UPDATE of a
    history row; ``subject`` is what is being erased (a fact, or a principal),
    ``reason`` why. Callers erase only what their reason covers: the grant
    opens history tables for the whole transaction, which is why it is recorded.
    """
    if not reason.strip():
        raise ValueError("Erasure needs a reason.")
    # The entry is hashed here (the chain's hash is Python's); the database
    # function saves it only as the next link of the chain, and verify_audit
    # checks its hash like any other entry's.
    entry = audit.next_entry(
        project, ACTION, subject, reason=reason, data=data, actor=actor, actor_user=actor_user
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT governance_open_erasure(%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)",
            [
                entry.project_id,
                entry.sequence,
                entry.actor,
                entry.actor_user_id,
                entry.object_type,
                entry.object_id,
                entry.reason,
                json.dumps(entry.data),
                entry.request_id,
                entry.created_at,
                entry.previous_hash,
                entry.entry_hash,
            ],
        )
        (entry.pk,) = cursor.fetchone()
    # The row exists now; treat the instance as loaded, not as one to insert.
    entry._state.adding = False
    return entry
