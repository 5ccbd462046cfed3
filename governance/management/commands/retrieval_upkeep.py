"""``manage.py retrieval_upkeep``: what the daily beat task does, now: make the retrieval
log's coming monthly partitions and expire the months past retention."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from governance.services import retention


class Command(BaseCommand):
    help = (
        "Make the retrieval log's partitions for this month and the next "
        "RETRIEVAL_PARTITIONS_AHEAD months, and drop every month whose events are all older than "
        "RETRIEVAL_RETENTION_DAYS, recording each in the audit trail of the projects it held."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        done = retention.run_upkeep()
        if done.created:
            self.stdout.write(f"Made {len(done.created)} partition(s): {', '.join(done.created)}.")
        else:
            self.stdout.write("The coming months' partitions already exist.")
        if done.expired:
            for month, count in done.expired.items():
                self.stdout.write(f"Expired {month}: {count} retrieval event(s), recorded in the audit trail")
        else:
            self.stdout.write(
                f"No month is entirely older than {settings.RETRIEVAL_RETENTION_DAYS} days; nothing expired."
            )
