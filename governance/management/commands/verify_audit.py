"""``manage.py verify_audit``: walk every project's hash chain, check it against the
signed checkpoints of its head and retrieval events against their seals, and
report the first problem (R15)."""

from __future__ import annotations

from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from governance.models import AuditEntry, Project, RetrievalEvent
from governance.rules.audit import BrokenLink
from governance.selectors.audit import verify_chain
from governance.services import audit, checkpoints


class Command(BaseCommand):
    help = (
        "Verify the hash-chained audit trail, the signed checkpoints of its heads and the seals of "
        "retrieval events. Exits 0 when every chain is intact and reaches its latest checkpoint and "
        "every retrieval event matches its seal; otherwise prints the first problem (project, entry "
        "sequence and id or retrieval event id, what is wrong) and exits 1. Entries still waiting to "
        "be sealed into their chain are sealed first; if some waited longer than sealing ever takes, "
        "a warning says so (the exit status stays 0 when everything else holds)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="Only this project's chain (slug)")
        parser.add_argument(
            "--checkpoints",
            metavar="FILE",
            help="Also check against the checkpoints exported to this file (checkpoint_audit --export)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project: Project | None = None
        if options["project"]:
            project = Project.objects.filter(slug=options["project"]).first()
            if project is None:
                raise CommandError(f"No project with slug '{options['project']}'.", returncode=2)
        project_id = project.pk if project is not None else None
        only_project = project is not None
        file_heads: list[checkpoints.SignedHead] = []
        if options["checkpoints"]:
            try:
                file_heads = checkpoints.read_file(options["checkpoints"])
            except checkpoints.CheckpointFileError as exc:
                raise CommandError(
                    f"Cannot check against exported checkpoints: {exc}.", returncode=2
                ) from exc
        # Reported as found, then sealed, so the walk covers every committed entry.
        waiting = audit.backlog(project_id, only_project=only_project)
        if only_project:
            audit.seal(project_id)
        else:
            audit.seal_all()
        warning = audit.backlog_warning(waiting)
        if warning:
            self.stdout.write(self.style.WARNING(f"WARNING {warning}"))
        broken = (
            verify_chain(project_id)
            or checkpoints.verify_against(project_id, only_project=only_project, file_heads=file_heads)
            or checkpoints.verify_retrieval_seals(project_id, only_project=only_project)
        )
        if isinstance(broken, BrokenLink):
            self._chain_broken(broken)
        elif isinstance(broken, checkpoints.AlteredRetrieval):
            self._retrievals_altered(broken)
        entries = AuditEntry.objects.all()
        if project is not None:
            entries = entries.filter(project=project)
        chains = list(entries.order_by().values("project_id").annotate(n=Count("id")))
        total = sum(chain["n"] for chain in chains)
        self.stdout.write(
            self.style.SUCCESS(f"Audit chain intact: {total} entries in {len(chains)} chain(s) verified.")
        )
        sealed = RetrievalEvent.objects.all()
        if project is not None:
            sealed = sealed.filter(project=project)
        self.stdout.write(f"Retrieval events match their seals: {sealed.count()} checked.")
        heads = checkpoints.latest_checkpoints(project_id, only_project=only_project)
        if heads:
            self.stdout.write(
                f"Each chain reaches its latest signed checkpoint ({len(heads)} checked"
                + (f", and {len(file_heads)} exported ones" if file_heads else "")
                + ")."
            )
        else:
            self.stdout.write(
                "No signed checkpoint yet: entries cut off from the end of a chain would go unnoticed. "
                "Run `manage.py checkpoint_audit`."
            )

    def _chain_broken(self, broken: BrokenLink) -> NoReturn:
        slug = (
            Project.objects.filter(pk=broken.project_id).values_list("slug", flat=True).first()
            if broken.project_id is not None
            else "(no project)"
        )
        entry_id = "-" if broken.entry_id is None else broken.entry_id
        # stdout carries the machine-readable line; CommandError puts the
        # message on stderr and sets the non-zero exit status.
        self.stdout.write(
            f"BROKEN project={slug} project_id={broken.project_id} sequence={broken.sequence} "
            f"entry_id={entry_id} problem={broken.problem}"
        )
        where = f"entry #{broken.sequence}" + ("" if broken.entry_id is None else f" (id {entry_id})")
        raise CommandError(
            f"Audit chain broken in project {slug} at {where}: {broken.problem}. "
            "Entries from here on cannot be trusted.",
            returncode=1,
        )

    def _retrievals_altered(self, altered: checkpoints.AlteredRetrieval) -> NoReturn:
        slug = Project.objects.filter(pk=altered.project_id).values_list("slug", flat=True).first()
        self.stdout.write(
            f"BROKEN project={slug} project_id={altered.project_id} retrieval_id={altered.event_id} "
            f"problem={altered.problem}"
        )
        raise CommandError(
            f"Retrieval events of project {slug} are not what was recorded: {altered.problem}. "
            "The retrieval log cannot be trusted as a record of what agents were given.",
            returncode=1,
        )
