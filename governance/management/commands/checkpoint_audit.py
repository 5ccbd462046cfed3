"""``manage.py checkpoint_audit``: sign the head of every audit chain now (the beat task does
the same every few minutes), optionally appending the checkpoints to a file."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.models import Project
from governance.services import checkpoints


class Command(BaseCommand):
    help = (
        "Write a signed checkpoint of each audit chain whose head moved since its last one. "
        "With --export PATH, append the latest checkpoint of every chain to PATH as JSON lines, "
        "a copy for `verify_audit --checkpoints PATH` that the database cannot rewrite."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--export", metavar="PATH", help="Append the latest checkpoints to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        created = checkpoints.write_checkpoints()
        if created:
            slugs = dict(Project.objects.values_list("pk", "slug"))
            self.stdout.write(f"Signed {len(created)} new checkpoint(s):")
            for checkpoint in created:
                chain = (
                    f"project {slugs.get(checkpoint.project_id)}"
                    if checkpoint.project_id is not None
                    else "entries without a project"
                )
                self.stdout.write(f"  {chain}: up to entry #{checkpoint.sequence}")
        else:
            self.stdout.write("Every chain's head is already checkpointed; nothing new to sign.")
        if options["export"]:
            written = checkpoints.export(checkpoints.latest_checkpoints(), options["export"])
            self.stdout.write(f"Appended {written} checkpoint(s) to {options['export']}.")
