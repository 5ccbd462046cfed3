"""The Celery app, configured from Django settings (CELERY_* names)."""

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init

from memoryadmin import collector

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")

app = Celery("memoryadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _require_secrets(**kwargs: Any) -> None:
    # Workers withdraw facts and key tombstones too: same secrets as the web process.
    from memoryadmin.checks import require_secrets

    require_secrets()


@worker_process_init.connect
def _settle_the_collector(**kwargs: Any) -> None:
    # As in memoryadmin/wsgi.py: what a pool process starts with lives as long
    # as it does, so full collections need not walk it again and again; and a
    # batch of embeddings sets off fewer collections of the young objects.
    collector.settle()


def ensure_filesystem_broker_folders() -> None:
    """The zero-setup filesystem broker fails on missing folders; make them before first use."""
    options = app.conf.broker_transport_options or {}
    if not str(app.conf.broker_url).startswith("filesystem://"):
        return
    for name in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(name):
            Path(options[name]).mkdir(parents=True, exist_ok=True)
