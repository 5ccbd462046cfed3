"""Row history (django-pghistory) and append-only protection (django-pgtrigger).

History rows are written by database triggers with the actor and request
context attached (governance.middleware, governance.celery context), and a
trigger refuses UPDATE, DELETE and TRUNCATE on them (R15). The one exception is erasure
(R8 withdrawal): ``governance.services.history.open_erasure`` calls the database
function ``governance_open_erasure`` (SECURITY DEFINER, owned by the owner role),
which writes the audit entry and opens erasure for its own transaction only, so
the withdrawal can blank erased statements in history. Nothing else opens it: the
application role cannot write the grant table the triggers consult. The
hash-chained audit trail covers only a digest of erased content, so it stays
verifiable.

pgtrigger lets any session skip a trigger by naming it in ``pgtrigger.ignore``;
these triggers refuse that unless the session's role owns the table (the owner
could disable them anyway; the application role cannot).
"""

from collections.abc import Callable
from typing import TypeVar

import pghistory
import pgtrigger
from django.db import models

# The switch of migrations 0002-0020: any session could set it, so since 0021
# the triggers ignore it. Kept for those migrations' data steps.
ERASURE_SETTING = "memoryadmin.erasure"
# Both functions are created in migration 0024_a_database_guards.
ERASURE_OPEN = "governance_erasure_open()"
# A DECLARE initialiser runs before pgtrigger's own "is this trigger ignored?"
# test in the trigger function, so it can refuse the skip instead of allowing it.
NO_SKIPPING = [("_not_skipped", "BOOLEAN := governance_refuse_skipping(TG_NAME, TG_RELID)")]

M = TypeVar("M", bound=type[models.Model])


def append_only(
    prefix: str = "append_only", *, allow_erasure: bool = False, allow_update_when: str | None = None
) -> list[pgtrigger.Trigger]:
    """Triggers that refuse DELETE and TRUNCATE always, and UPDATE unless erasure is under way
    (``allow_erasure``) or the row-level SQL condition ``allow_update_when`` holds."""
    update_condition = None
    if allow_erasure:
        update_condition = pgtrigger.Condition(f"NOT {ERASURE_OPEN}")
    elif allow_update_when:
        update_condition = pgtrigger.Condition(f"NOT ({allow_update_when})")
    return [
        pgtrigger.Protect(name=f"{prefix}_no_delete", operation=pgtrigger.Delete, declare=NO_SKIPPING),
        pgtrigger.Protect(
            name=f"{prefix}_no_update",
            operation=pgtrigger.Update,
            condition=update_condition,
            declare=NO_SKIPPING,
        ),
        # Row-level triggers never see TRUNCATE, which empties a table in one
        # statement; only a statement-level trigger can refuse it.
        # (pgtrigger's Protect has no statement-level form for TRUNCATE, hence a plain trigger.)
        pgtrigger.Trigger(
            name=f"{prefix}_no_truncate",
            when=pgtrigger.Before,
            operation=pgtrigger.Truncate,
            level=pgtrigger.Statement,
            declare=NO_SKIPPING,
            func="RAISE EXCEPTION 'Cannot truncate % : its rows are append-only history', TG_TABLE_NAME;",
        ),
    ]


def tracked(*, exclude: list[str] | None = None, erasable: bool = False) -> Callable[[M], M]:
    """Record every insert, update and delete of the model in an append-only history table."""
    return pghistory.track(
        pghistory.InsertEvent(),
        pghistory.UpdateEvent(),
        pghistory.DeleteEvent(),
        exclude=exclude or [],
        context_field=pghistory.ContextJSONField(),
        meta={"triggers": append_only("history", allow_erasure=erasable)},
    )
