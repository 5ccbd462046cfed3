"""Review decisions on pending and quarantined writes: approve, reject, edit-and-approve."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from governance.models import (
    AuditEntry,
    Fact,
    RetrievalEvent,
    ReviewDecision,
    Supersession,
    Tombstone,
    Write,
)
from governance.models.retrievals import events_naming
from governance.models.writes import REVIEWABLE
from governance.rules import contradictions, identifiers
from governance.rules.text import lexical_signature, statement_fingerprint
from governance.rules.tokens import count_tokens
from governance.selectors.erasures import pseudonym_of
from governance.services import audit, conflicts, session_blocks
from governance.services.facts import enqueue_embedding, statement_digest, supersede_fact
from governance.services.history import without_quotes
from governance.services.writes import TOMBSTONE_VALUE_MATCHES, fingerprint_key, lock_active_fact


class AlreadyDecided(Exception):
    """Another reviewer decided this write first."""

    def __init__(self, write: Write) -> None:
        super().__init__(f"Write {write.pk} was already decided ({write.status}).")
        self.write = write


class Tombstoned(Exception):
    """The statement to approve was withdrawn for this principal: approving it would re-learn it (R8)."""

    def __init__(self, write: Write, tombstone: Tombstone, *, kinds: tuple[str, ...] = ()) -> None:
        when = tombstone.created_at.strftime("%Y-%m-%d")
        what = (
            f"it carries the same {identifiers.describe(kinds)} as a statement that was withdrawn on {when}"
            if kinds
            else f"it was withdrawn on {when}"
        )
        super().__init__(
            f"This statement cannot be approved: {what} because the person it is "
            "about asked for it to be forgotten, and a withdrawn statement is never learned again, "
            "in any words. Reject the write instead."
        )
        self.write = write
        self.tombstone = tombstone


class UndoRefused(Exception):
    """The decision can no longer be undone; the message says why, for the reviewer."""


class InvalidDecision(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


ACTIONS = ("approve", "reject", conflicts.KEEP_BOTH)


@dataclass(frozen=True)
class Decision:
    action: str  # approve | reject | keep_both (a write that may contradict a current fact)
    reason: str
    statement: str | None = None  # given: edit-and-approve


def decide(write_id: int, decision: Decision, *, reviewer: Any) -> Write:
    """Apply one decision; exactly one of two racing reviewers wins."""
    reason = decision.reason.strip()
    if not reason:
        raise InvalidDecision("reason", "A reason is required for every decision.")
    if decision.action not in ACTIONS:
        raise InvalidDecision("action", "Action must be 'approve', 'reject' or 'keep_both'.")
    if decision.statement is not None and not decision.statement.strip():
        raise InvalidDecision("statement", "An edited statement cannot be empty.")
    if decision.statement is not None and decision.action != "approve":
        raise InvalidDecision("statement", "Only an approval can edit the statement.")
    try:
        return _decide(write_id, decision, reason, reviewer)
    except IntegrityError as exc:
        # The row lock makes this unreachable in practice; the unique decision
        # per write is the database's last word if a code path skipped it.
        if "decision_write_sequence_unique" in str(exc) or "unique" in str(exc).lower():
            raise AlreadyDecided(Write.objects.get(pk=write_id)) from exc
        raise


@transaction.atomic
def _decide(write_id: int, decision: Decision, reason: str, reviewer: Any) -> Write:
    # Lock the write: a second reviewer waits here, then sees it decided.
    # of=("self",): the nullable agent join cannot be locked (PostgreSQL refuses FOR UPDATE on it).
    write = Write.objects.select_for_update(of=("self",)).select_related("project", "agent").get(pk=write_id)
    latest = _latest_decision(write)
    if write.status not in REVIEWABLE or (latest is not None and latest.action != "undo"):
        raise AlreadyDecided(write)
    edited = decision.statement.strip() if decision.statement is not None else None
    action = "edit_approve" if edited is not None and edited != write.statement else decision.action
    # A conflict review (services/conflicts.py): its fact is already active, and
    # the question is only what happens to the pair.
    conflict_review = contradictions.is_conflict_review(write.source_ref, write.conflicts_with_id)
    if decision.action == conflicts.KEEP_BOTH and write.conflicts_with_id is None:
        raise InvalidDecision(
            "action", "Keep both is for a write that may contradict a current fact; this one does not."
        )
    if conflict_review and edited is not None and edited != write.statement:
        raise InvalidDecision(
            "statement",
            "This statement is already in memory: approve, reject or keep both; it cannot be edited here.",
        )
    if decision.action in ("approve", conflicts.KEEP_BOTH):
        # Every approval re-runs the tombstone check: the person may have asked
        # to forget this statement (or the edited one) after it was written.
        _refuse_tombstoned(write, edited)
    ReviewDecision.objects.create(
        write=write,
        reviewer=reviewer,
        action=action,
        reason=reason,
        edited_statement=edited or "",
        # After an undo the write is decided afresh under the next number.
        sequence=latest.sequence + 1 if latest is not None else 1,
    )
    # The decision row keeps the note as written (erasable with the write); the
    # audit chain and the supersession, which are never erased, get it without
    # any quote of the statement under review, so forgetting the person later
    # (withdrawal, erasure) leaves no copy of it there (R8, R15).
    reason = without_quotes(reason, [s for s in (write.statement, edited) if s])
    now = timezone.now()
    previous = write.status
    superseded: list[int] = []
    if decision.action in ("approve", conflicts.KEEP_BOTH):
        fact = _approved_fact(write, edited, reviewer)
        # R8: its scope ended, or it was withdrawn, while it waited. The
        # approval is recorded, but nothing is brought back from an ending,
        # and nothing active is superseded by it.
        scope_ended = fact.status not in REVIEWABLE and not (conflict_review and fact.status == "active")
        current = (
            lock_active_fact(write.project_id, write.principal_id, fact.session_id, fact.key, exclude=fact.pk)
            if not scope_ended and decision.action == "approve"
            else None
        )
        if (
            current is None
            and write.conflicts_with_id is not None
            and not scope_ended
            and decision.action == "approve"
        ):
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
        # A person has read it: the guard's second look at its meaning is not owed any more.
        fact.meaning_check_pending = False
        fact.save()
        if decision.action == conflicts.KEEP_BOTH and not scope_ended:
            # Not a conflict: the older one is injected again beside it.
            session_blocks.invalidate([fact.pk, write.conflicts_with_id or fact.pk])
        write.status = "active"
        write.fact = fact
    else:
        if write.fact_id is not None:
            # A conflict review's fact is already active: rejecting it takes it out of memory.
            takes_out = (*REVIEWABLE, "active") if conflict_review else REVIEWABLE
            rejected = Fact.objects.filter(pk=write.fact_id, status__in=takes_out).update(
                status="rejected",
                status_reason=f"Rejected by {reviewer.get_username()}: {reason}",
                status_changed_at=now,
            )
            if rejected and conflict_review:
                session_blocks.invalidate([write.fact_id, write.conflicts_with_id or write.fact_id])
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
        data={
            "from": previous,
            "to": write.status,
            "fact": write.fact_id,
            "supersedes": superseded,
            **({"kept_with": write.conflicts_with_id} if action == conflicts.KEEP_BOTH else {}),
        },
    )
    return write


def _latest_decision(write: Write) -> ReviewDecision | None:
    return ReviewDecision.objects.filter(write=write).order_by("-sequence").first()


def undo_window() -> timedelta:
    return timedelta(seconds=settings.REVIEW_UNDO_SECONDS)


def undo(write_id: int, *, reviewer: Any, now: datetime | None = None) -> Write:
    """Put a just-decided write back in the queue, as it was before the decision.

    The trail stays append-only: the decision row and its audit entry remain, and
    the undo adds a decision row (``undo``) and a ``write.undo`` audit entry. It is
    allowed only to the reviewer who decided, within ``REVIEW_UNDO_SECONDS``, and
    only while nothing has built on the decision: an approved fact must still be
    active, must not have replaced another fact, and must not have been given to
    an agent (reversing what an agent already received would rewrite history).
    """
    now = now or timezone.now()
    with transaction.atomic():
        # The same lock as a decision: an undo and a decision on one write never interleave.
        write = (
            Write.objects.select_for_update(of=("self",)).select_related("project", "agent").get(pk=write_id)
        )
        latest = _latest_decision(write)
        if latest is None or latest.action == "undo" or write.status in REVIEWABLE:
            raise UndoRefused("There is no decision on this write to undo.")
        if latest.reviewer_id != reviewer.pk:
            raise UndoRefused("Only the reviewer who decided can undo the decision.")
        if now - latest.created_at > undo_window():
            raise UndoRefused(
                f"The decision can no longer be undone: undo is possible for "
                f"{settings.REVIEW_UNDO_SECONDS} seconds after deciding."
            )
        waiting = _status_before(write, latest)
        fact = Fact.objects.select_for_update().filter(pk=write.fact_id).first() if write.fact_id else None
        status_reason = f"Back in the review queue: {reviewer.get_username()} undid the decision"
        if latest.action in ("approve", "edit_approve"):
            _refuse_undo_of_approval(fact)
            assert fact is not None  # an approval always carries its fact
            if latest.action == "edit_approve":
                # The edit was the reviewer's; undone, the fact holds what the agent sent again.
                _set_statement(fact, write, write.statement)
            fact.status = waiting
            fact.status_reason = status_reason
            fact.status_changed_at = now
            fact.save()
        elif fact is not None and fact.status == "rejected":
            fact.status = waiting
            fact.status_reason = status_reason
            fact.status_changed_at = now
            fact.save(update_fields=["status", "status_reason", "status_changed_at"])
        decided_status = write.status
        write.status = waiting
        write.decided_at = None
        write.save(update_fields=["status", "decided_at"])
        reason = f"Undid the decision ({latest.action}) within the undo window"
        ReviewDecision.objects.create(
            write=write, reviewer=reviewer, action="undo", reason=reason, sequence=latest.sequence + 1
        )
        audit.record(
            write.project,
            "write.undo",
            write,
            reason=reason,
            actor=f"user:{reviewer.get_username()}",
            actor_user=reviewer,
            data={"from": decided_status, "to": waiting, "fact": write.fact_id, "undoes": latest.action},
        )
    return write


def _status_before(write: Write, decision: ReviewDecision) -> str:
    """Where the write waited before ``decision``: the ``from`` of the decision's audit entry."""
    entry = (
        AuditEntry.objects.filter(
            project=write.project_id,
            object_type="write",
            object_id=str(write.pk),
            action=f"write.{decision.action}",
        )
        # Newest recorded first: an entry not sealed yet has no sequence.
        .order_by("-id")
        .values_list("data", flat=True)
        .first()
    )
    before = (entry or {}).get("from")
    return before if before in REVIEWABLE else "pending_review"


def _refuse_undo_of_approval(fact: Fact | None) -> None:
    if fact is None or fact.status != "active":
        raise UndoRefused(
            "The decision can no longer be undone: the approved fact has changed since "
            "(it was replaced, forgotten or has expired)."
        )
    if Supersession.objects.filter(new_fact=fact).exists():
        raise UndoRefused(
            "The decision can no longer be undone: the approved fact already replaced an older one. "
            "Correct it from the fact's page instead."
        )
    if RetrievalEvent.objects.filter(pk__in=events_naming(fact.pk, selected=True)).exists():
        raise UndoRefused(
            "The decision can no longer be undone: an agent has already been given the approved fact."
        )


def _set_statement(fact: Fact, write: Write, statement: str) -> None:
    fact.statement = statement
    fact.statement_digest = statement_digest(statement)
    fact.claims = contradictions.stored_claims(statement, fact.key)
    fact.fingerprint = statement_fingerprint(statement, fingerprint_key())
    fact.lexical_signature = lexical_signature(statement, fingerprint_key())
    fact.embedding = None
    fact.embedded_at = None
    policy = write.agent.active_policy.policy if write.agent and write.agent.active_policy else None
    fact.token_count = count_tokens(statement, policy.encoding if policy else "o200k_base")
    enqueue_embedding(fact.pk)


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
    tombstones = Tombstone.objects.filter(principal, project=write.project_id).order_by("-created_at")
    tombstone = tombstones.filter(fingerprint__in=fingerprints).first()
    if tombstone is not None:
        raise Tombstoned(write, tombstone)
    # A rewording that carries the withdrawn statement's identifying values
    # (an address, a phone number, a name with a place) is the same assertion
    # to the person who asked to forget it (R8, rules/identifiers.py).
    for statement in sorted(statements):
        digests = identifiers.value_digests(statement, fingerprint_key())
        if not digests:
            continue
        sharing = tombstones.filter(value_digests__overlap=list(digests)).only(
            "pk", "created_at", "value_digests"
        )[:TOMBSTONE_VALUE_MATCHES]
        for candidate in sharing:
            kinds = identifiers.blocks(digests, candidate.value_digests)
            if kinds is not None:
                raise Tombstoned(write, candidate, kinds=kinds)


def _approved_fact(write: Write, edited: str | None, reviewer: Any) -> Fact:
    if write.fact_id is None:
        raise InvalidDecision("action", "This write carries no fact to approve.")
    fact = Fact.objects.select_for_update().get(pk=write.fact_id)
    if edited is not None and edited != fact.statement:
        # The fact was never active, so its text can still change; the write
        # keeps what the agent sent and the decision keeps the edit.
        _set_statement(fact, write, edited)
    return fact
