"""The one door through which erasure changes rows of append-only tables.

History rows (django-pghistory), review decisions and retrieval events refuse
UPDATE (R15); erasure (R8) is the one exception. Every erasing statement of
the person-erasure service goes through ``erase_rows``, so how the exception
is granted lives here alone: today a transaction-local setting the triggers
read (``governance.models.history.ERASURE_SETTING``); a SECURITY DEFINER
database function can replace it by changing only this function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from governance.models.history import ERASURE_SETTING


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
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, 'on', true)", [ERASURE_SETTING])
        try:
            cursor.execute(statement, list(params))
            changed = cursor.rowcount
        finally:
            cursor.execute("SELECT set_config(%s, 'off', true)", [ERASURE_SETTING])
    return max(changed, 0)
