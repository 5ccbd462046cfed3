"""``manage.py verify_audit``: walk every project's hash chain and report the first broken link (R15)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from governance.models import AuditEntry, Project
from governance.services.audit import verify_chain


class Command(BaseCommand):
    help = (
        "Verify the hash-chained audit trail. Exits 0 when every chain is intact; otherwise prints "
        "the first broken link (project, entry sequence and id, problem) and exits 1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="Only this project's chain (slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        project_id: int | None = None
        if options["project"]:
            project = Project.objects.filter(slug=options["project"]).first()
            if project is None:
                raise CommandError(f"No project with slug '{options['project']}'.", returncode=2)
            project_id = project.pk
        broken = verify_chain(project_id)
        if broken is not None:
            slug = (
                Project.objects.filter(pk=broken.project_id).values_list("slug", flat=True).first()
                if broken.project_id is not None
                else "(no project)"
            )
            # stdout carries the machine-readable line; CommandError puts the
            # message on stderr and sets the non-zero exit status.
            self.stdout.write(
                f"BROKEN project={slug} project_id={broken.project_id} sequence={broken.sequence} "
                f"entry_id={broken.entry_id} problem={broken.problem}"
            )
            raise CommandError(
                f"Audit chain broken in project {slug} at entry #{broken.sequence} "
                f"(id {broken.entry_id}): {broken.problem}. Entries from here on cannot be trusted.",
                returncode=1,
            )
        entries = AuditEntry.objects.all()
        if project_id is not None:
            entries = entries.filter(project_id=project_id)
        chains = list(entries.order_by().values("project_id").annotate(n=Count("id")))
        total = sum(chain["n"] for chain in chains)
        self.stdout.write(
            self.style.SUCCESS(f"Audit chain intact: {total} entries in {len(chains)} chain(s) verified.")
        )
