"""Row history (django-pghistory) and append-only protection (django-pgtrigger).

History rows are written by database triggers with the actor and request
context attached (governance.middleware, governance.celery context), and a
trigger refuses UPDATE and DELETE on them (R15). The one exception is erasure
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


def append_only(prefix: str = "append_only", *, allow_erasure: bool = False) -> list[pgtrigger.Protect]:
    """Triggers that refuse DELETE always, and UPDATE unless erasure is under way."""
    update_condition = None
    if allow_erasure:
        update_condition = pgtrigger.Condition(
            f"COALESCE(current_setting('{ERASURE_SETTING}', true), '') <> 'on'"
        )
    return [
        pgtrigger.Protect(name=f"{prefix}_no_delete", operation=pgtrigger.Delete),
        pgtrigger.Protect(name=f"{prefix}_no_update", operation=pgtrigger.Update, condition=update_condition),
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
