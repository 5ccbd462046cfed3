"""Reads for forgetting a person: the dry run, finding the person, erasure jobs, checking a receipt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from governance.models import (
    AuditEntry,
    Fact,
    Job,
    Principal,
    Project,
    RetrievalEvent,
    ReviewDecision,
    Session,
    SessionBlock,
    Write,
)
from governance.rules import erasure as rules
from governance.rules.audit import entry_digest
from governance.selectors.audit import verify_chain


def pseudonym_of(external_id: str) -> str:
    return rules.pseudonym(external_id, settings.TOMBSTONE_KEY.encode())


def erased_fact_q() -> Q:
    """A fact with nothing left to erase: withdrawn, blank, no vector or summary material, tombstoned."""
    return (
        Q(status="withdrawn", statement="", embedding__isnull=True)
        & Q(summary_source__isnull=True, summary_check__isnull=True)
        & Q(tombstone__isnull=False)
    )


def facts_to_erase(principal_id: int) -> QuerySet[Fact]:
    return Fact.objects.filter(principal_id=principal_id).exclude(erased_fact_q())


def writes_to_erase(principal_id: int) -> QuerySet[Write]:
    """The person's writes whose text is still there (withdrawal blanks text and findings together)."""
    return Write.objects.filter(principal_id=principal_id).exclude(statement="")


def decisions_to_erase(principal_id: int) -> QuerySet[ReviewDecision]:
    return ReviewDecision.objects.filter(write__principal_id=principal_id).filter(
        ~Q(reason=rules.ERASED) | ~Q(edited_statement="")
    )


def principal_by_external_id(project: Project, external_id: str) -> Principal | None:
    """The person an agent or reviewer names: by their external id, or, once forgotten,
    by its keyed pseudonym (so asking again finds the same person and erases nothing new)."""
    found = Principal.objects.filter(project=project, external_id=external_id).first()
    if found is not None:
        return found
    stem = pseudonym_of(external_id)
    return (
        Principal.objects.filter(project=project)
        .filter(Q(external_id=stem) | Q(external_id__startswith=f"{stem}-"))
        .order_by("-pk")
        .first()
    )


@dataclass(frozen=True)
class Inventory:
    """What forgetting a person would erase now, by kind (``rules.empty_counts`` shape)."""

    counts: dict[str, Any]

    @property
    def total(self) -> int:
        return rules.total_items(self.counts)

    @property
    def rows(self) -> list[tuple[str, str, int]]:
        return rules.labelled(self.counts)


def inventory(principal: Principal) -> Inventory:
    """The dry run: counts only, nothing read into memory but ids and numbers, nothing changed."""
    counts = rules.empty_counts()
    by_kind = facts_to_erase(principal.pk).order_by().values("kind").annotate(n=Count("id"))
    for row in by_kind:
        counts["facts"][row["kind"]] = row["n"]
    counts["writes"] = writes_to_erase(principal.pk).count()
    counts["review_decisions"] = decisions_to_erase(principal.pk).count()
    counts["retrieval_events"] = len(retrievals_to_redact(principal.pk))
    counts["session_blocks"] = (
        SessionBlock.objects.filter(Q(principal_id=principal.pk) | Q(session__principal_id=principal.pk))
        .distinct()
        .count()
    )
    counts["resume_hints"] = Session.objects.filter(principal_id=principal.pk).exclude(resume_hint="").count()
    return Inventory(counts)


def retrievals_to_redact(principal_id: int) -> set[int]:
    """The person's retrieval events with text still to erase: a question asked, a line
    under the person's heading or a resume hint, or a fact of theirs not yet erased."""
    pending: set[int] = set()
    events = RetrievalEvent.objects.filter(principal_id=principal_id).values_list("pk", "query", "context")
    for pk, query, context in events.iterator(chunk_size=500):
        if query or rules.redact_person_section(context) != context:
            pending.add(pk)
    unerased = list(facts_to_erase(principal_id).values_list("pk", flat=True))
    pending |= set(
        RetrievalEvent.objects.filter(selected_fact_ids__overlap=unerased).values_list("pk", flat=True)
    )
    return pending


def erasure_job(projects: QuerySet[Project], job_id: object) -> QuerySet[Job]:
    """An erasure job inside these projects (another project's is a 404)."""
    return Job.objects.filter(project__in=projects, pk=job_id, kind=rules.JOB_KIND).select_related(
        "project", "agent", "created_by"
    )


def receipt_problems(document: Any) -> list[str]:
    """Why a receipt does not verify against the audit chain; empty when it does.

    The receipt names its chain position. The entry there must be intact (its
    hash recomputes, and the chain through it links), be an erasure, and
    state exactly what the receipt states.
    """
    if not isinstance(document, dict) or not isinstance(document.get("audit"), dict):
        return ["This is not an erasure receipt: it names no audit entry."]
    position = document["audit"]
    project = Project.objects.filter(slug=str(document.get("project", ""))).first()
    sequence = position.get("sequence")
    if project is None or not isinstance(sequence, int):
        return ["The receipt names no audit entry of a project here."]
    entry = (
        AuditEntry.objects.filter(project=project, sequence=sequence, action=rules.RECEIPT_ACTION)
        .select_related("project")
        .first()
    )
    if entry is None:
        return [f"Audit entry #{sequence} of {project.slug} is not an erasure."]
    problems = []
    if entry_digest(entry) != entry.entry_hash:
        problems.append(f"Audit entry #{sequence} was changed after it was written.")
    broken = verify_chain(project.pk)
    if broken is not None:
        problems.append(f"The audit trail is broken at entry #{broken.sequence}: {broken.problem}.")
    recorded = recorded_receipt(entry)
    problems += [
        f"The receipt's '{field}' differs from what audit entry #{sequence} recorded."
        for field in rules.receipt_differences(document, recorded)
    ]
    return problems


def recorded_receipt(entry: AuditEntry) -> dict[str, Any]:
    """The receipt as the audit entry states it (a sealed one: the receipt names its place)."""
    assert entry.project is not None
    assert entry.sequence is not None, "a receipt is made from a sealed entry (audit.record_sealed)"
    return rules.receipt(
        project=entry.project.slug,
        sequence=entry.sequence,
        entry_hash=entry.entry_hash,
        actor=entry.actor,
        reason=entry.reason,
        recorded_at=entry.created_at,
        data=entry.data,
    )
