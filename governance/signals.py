"""Celery hooks: history rows and audit entries written by a task name the task."""

from __future__ import annotations

from typing import Any

import pghistory
from celery.signals import task_postrun, task_prerun

from governance import context, rls

_open: dict[str, Any] = {}


@task_prerun.connect
def _enter_task_context(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is None or task is None:
        return
    label = f"task:{task.name}"
    scopes = (
        context.actor_scope(label, request_id=task_id),
        pghistory.context(actor=label, task_id=task_id),
        # Tasks are system work, even when run eagerly inside a request.
        rls.every_project(),
    )
    for scope in scopes:
        scope.__enter__()
    _open[task_id] = scopes


@task_postrun.connect
def _exit_task_context(task_id: str | None = None, **_: Any) -> None:
    scopes = _open.pop(task_id or "", None)
    if scopes:
        for scope in reversed(scopes):
            scope.__exit__(None, None, None)
