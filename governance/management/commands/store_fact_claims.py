"""``manage.py store_fact_claims``: store the claims of facts written before migration 0047,
or after a change to the claim reader (``contradictions.CLAIMS_VERSION``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.services import facts


class Command(BaseCommand):
    help = (
        "Store each fact's statement claims where they are missing or were read by another version "
        "of the reader, in batches (one transaction each). Retrieval answers the same before and after; "
        "it reads a statement without stored claims itself, which is slower."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size", type=int, default=facts.CLAIMS_BATCH, help="Facts per transaction"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        done = facts.store_claims(batch_size=options["batch_size"])
        self.stdout.write(
            f"Stored the claims of {done.stored} fact(s); {done.current} already had this reader's."
        )
