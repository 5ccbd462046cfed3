"""Row history (django-pghistory) and append-only protection (django-pgtrigger).

History rows are written by database triggers with the actor and request
context attached (governance.middleware, governance.celery context), and a
trigger refuses UPDATE, DELETE and TRUNCATE on them (R15). The one exception is erasure
(R8 withdrawal): the withdrawal service sets ``memoryadmin.erasure`` for its
own transaction so it can blank erased statements in history; the hash-chained
audit trail covers only a digest of that content, so it stays verifiable.
"""

from collections.abc import Callable
from typing import TypeVar

import pghistory
import pgtrigger
from django.db import models

ERASURE_SETTING = "memoryadmin.erasure"

M = TypeVar("M", bound=type[models.Model])


def append_only(prefix: str = "append_only", *, allow_erasure: bool = False) -> list[pgtrigger.Trigger]:
    """Triggers that refuse DELETE and TRUNCATE always, and UPDATE unless erasure is under way."""
    update_condition = None
    if allow_erasure:
        update_condition = pgtrigger.Condition(
            f"COALESCE(current_setting('{ERASURE_SETTING}', true), '') <> 'on'"
        )
    return [
        pgtrigger.Protect(name=f"{prefix}_no_delete", operation=pgtrigger.Delete),
        pgtrigger.Protect(name=f"{prefix}_no_update", operation=pgtrigger.Update, condition=update_condition),
        # Row-level triggers never see TRUNCATE, which empties a table in one
        # statement; only a statement-level trigger can refuse it.
        # (pgtrigger's Protect has no statement-level form for TRUNCATE, hence a plain trigger.)
        pgtrigger.Trigger(
            name=f"{prefix}_no_truncate",
            when=pgtrigger.Before,
            operation=pgtrigger.Truncate,
            level=pgtrigger.Statement,
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
