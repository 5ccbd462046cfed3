"""``manage.py sign_statements``: give facts stored before migration 0046 their lexical signature.

Run once after upgrading (it works while ``make run`` is up); until then writes
compare those facts as they always did, only without the shortcut.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.services import facts


class Command(BaseCommand):
    help = (
        "Work out the lexical signature of every fact stored without one, in batches, so that a "
        "write reads only the facts that can repeat its statement."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=facts.SIGN_BATCH)

    def handle(self, *args: Any, **options: Any) -> None:
        signed = facts.sign_statements(batch_size=options["batch_size"])
        self.stdout.write(f"Signed {signed} fact(s).")
