"""Review decisions on pending and quarantined writes: approve, reject, edit-and-approve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from governance.models import Fact, ReviewDecision, Tombstone, Write
from governance.models.writes import REVIEWABLE
from governance.rules.text import statement_fingerprint
from governance.rules.tokens import count_tokens
from governance.selectors.erasures import pseudonym_of
from governance.services import audit
from governance.services.facts import enqueue_embedding, statement_digest, supersede_fact, without_quotes
from governance.services.writes import fingerprint_key, lock_active_fact


class AlreadyDecided(Exception):
    """Another reviewer decided this write first."""

    def __init__(self, write: Write) -> None:
        super().__init__(f"Write {write.pk} was already decided ({write.status}).")
        self.write = write


class Tombstoned(Exception):
    """The statement to approve was withdrawn for this principal: approving it would re-learn it (R8)."""

    def __init__(self, write: Write, tombstone: Tombstone) -> None:
        when = tombstone.created_at.strftime("%Y-%m-%d")
        super().__init__(
            f"This statement cannot be approved: it was withdrawn on {when} because the person it is "
            "about asked for it to be forgotten, and a withdrawn statement is never learned again. "
            "Reject the write instead."
        )
        self.write = write
        self.tombstone = tombstone


class InvalidDecision(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Decision:
    action: str  # approve | reject
    reason: str
    statement: str | None = None  # given: edit-and-approve


def decide(write_id: int, decision: Decision, *, reviewer: Any) -> Write:
    """Apply one decision; exactly one of two racing reviewers wins."""
    reason = decision.reason.strip()
    if not reason:
        raise InvalidDecision("reason", "A reason is required for every decision.")
    if decision.action not in ("approve", "reject"):
        raise InvalidDecision("action", "Action must be 'approve' or 'reject'.")
    if decision.statement is not None and not decision.statement.strip():
        raise InvalidDecision("statement", "An edited statement cannot be empty.")
    if decision.statement is not None and decision.action == "reject":
        raise InvalidDecision("statement", "Only an approval can edit the statement.")
    try:
        return _decide(write_id, decision, reason, reviewer)
    except IntegrityError as exc:
        # The row lock makes this unreachable in practice; the unique decision
        # per write is the database's last word if a code path skipped it.
        if "governance_reviewdecision_write_id" in str(exc) or "unique" in str(exc).lower():
            raise AlreadyDecided(Write.objects.get(pk=write_id)) from exc
        raise


@transaction.atomic
def _decide(write_id: int, decision: Decision, reason: str, reviewer: Any) -> Write:
    # Lock the write: a second reviewer waits here, then sees it decided.
    # of=("self",): the nullable agent join cannot be locked (PostgreSQL refuses FOR UPDATE on it).
    write = Write.objects.select_for_update(of=("self",)).select_related("project", "agent").get(pk=write_id)
    if write.status not in REVIEWABLE or ReviewDecision.objects.filter(write=write).exists():
        raise AlreadyDecided(write)
    edited = decision.statement.strip() if decision.statement is not None else None
    action = "edit_approve" if edited is not None and edited != write.statement else decision.action
    if decision.action == "approve":
        # Every approval re-runs the tombstone check: the person may have asked
        # to forget this statement (or the edited one) after it was written.
        _refuse_tombstoned(write, edited)
    ReviewDecision.objects.create(
        write=write, reviewer=reviewer, action=action, reason=reason, edited_statement=edited or ""
    )
    # The decision row keeps the note as written (erasable with the write); the
    # audit chain and the supersession, which are never erased, get it without
    # any quote of the statement under review, so forgetting the person later
    # (withdrawal, erasure) leaves no copy of it there (R8, R15).
    reason = without_quotes(reason, [s for s in (write.statement, edited) if s])
    now = timezone.now()
    previous = write.status
    superseded: list[int] = []
    if decision.action == "approve":
        fact = _approved_fact(write, edited, reviewer)
        # R8: its scope ended, or it was withdrawn, while it waited. The
        # approval is recorded, but nothing is brought back from an ending,
        # and nothing active is superseded by it.
        scope_ended = fact.status not in REVIEWABLE
        current = (
            None
            if scope_ended
            else lock_active_fact(
                write.project_id, write.principal_id, fact.session_id, fact.key, exclude=fact.pk
            )
        )
        if current is None and write.conflicts_with_id is not None and not scope_ended:
            # An unkeyed write held because it contradicts an active fact (R6):
            # approving it is the reviewer deciding the newer value wins.
            current = (
                Fact.objects.select_for_update()
                .filter(pk=write.conflicts_with_id, status="active")
                .exclude(pk=fact.pk)
                .first()
            )
        if current is not None:
            supersede_fact(
                current,
                fact,
                reason=f"Approved by {reviewer.get_username()}: {reason}",
                decided_by=f"user:{reviewer.get_username()}",
                write=write,
            )
            superseded.append(current.pk)
        if not scope_ended:
            fact.status = "active"
            fact.status_reason = f"Approved by {reviewer.get_username()}"
            fact.status_changed_at = now
        fact.save()
        write.status = "active"
        write.fact = fact
    else:
        if write.fact_id is not None:
            Fact.objects.filter(pk=write.fact_id, status__in=REVIEWABLE).update(
                status="rejected",
                status_reason=f"Rejected by {reviewer.get_username()}: {reason}",
                status_changed_at=now,
            )
        write.status = "rejected"
    write.decided_at = now
    write.save(update_fields=["status", "fact", "decided_at"])
    audit.record(
        write.project,
        f"write.{action}",
        write,
        reason=reason,
        actor=f"user:{reviewer.get_username()}",
        actor_user=reviewer,
        data={"from": previous, "to": write.status, "fact": write.fact_id, "supersedes": superseded},
    )
    return write


def _refuse_tombstoned(write: Write, edited: str | None) -> None:
    """Raise Tombstoned when the statement to approve matches a tombstone of this project and principal."""
    fact_statement = (
        Fact.objects.filter(pk=write.fact_id).values_list("statement", flat=True).first()
        if write.fact_id is not None
        else None
    )
    # The edit, and what was proposed: editing a withdrawn statement into a
    # look-alike must not be a way around the person's request.
    statements = {s for s in (edited, fact_statement, write.statement) if s}
    fingerprints = {statement_fingerprint(s, fingerprint_key()) for s in statements}
    principal = (
        Q(fact__principal_id=write.principal_id)
        if write.principal_id is not None
        else Q(fact__principal__isnull=True)
    )
    if write.principal is not None:
        # A person who was forgotten and is mentioned again under the same id is a new
        # row; their erased self lives on under the keyed pseudonym, and so do its tombstones.
        stem = pseudonym_of(write.principal.external_id)
        principal |= Q(fact__principal__external_id=stem) | Q(
            fact__principal__external_id__startswith=f"{stem}-"
        )
    tombstone = (
        Tombstone.objects.filter(principal, project=write.project_id, fingerprint__in=fingerprints)
        .order_by("-created_at")
        .first()
    )
    if tombstone is not None:
        raise Tombstoned(write, tombstone)


def _approved_fact(write: Write, edited: str | None, reviewer: Any) -> Fact:
    if write.fact_id is None:
        raise InvalidDecision("action", "This write carries no fact to approve.")
    fact = Fact.objects.select_for_update().get(pk=write.fact_id)
    if edited is not None and edited != fact.statement:
        # The fact was never active, so its text can still change; the write
        # keeps what the agent sent and the decision keeps the edit.
        fact.statement = edited
        fact.statement_digest = statement_digest(edited)
        fact.fingerprint = statement_fingerprint(edited, fingerprint_key())
        fact.embedding = None
        fact.embedded_at = None
        policy = write.agent.active_policy.policy if write.agent and write.agent.active_policy else None
        fact.token_count = count_tokens(edited, policy.encoding if policy else "o200k_base")
        enqueue_embedding(fact.pk)
    return fact
