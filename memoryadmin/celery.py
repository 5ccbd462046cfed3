"""The Celery app, configured from Django settings (CELERY_* names)."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")

app = Celery("memoryadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def ensure_filesystem_broker_folders() -> None:
    """The zero-setup filesystem broker fails on missing folders; make them before first use."""
    options = app.conf.broker_transport_options or {}
    if not str(app.conf.broker_url).startswith("filesystem://"):
        return
    for name in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(name):
            Path(options[name]).mkdir(parents=True, exist_ok=True)
