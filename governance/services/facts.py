"""State changes of facts: supersede, corroborate, verify, re-rate, and the three endings (R8)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.gathering import Gathering
from governance.models import (
    Agent,
    Fact,
    RetrievalEvent,
    Session,
    Supersession,
    Tombstone,
    Write,
)
from governance.models.retrievals import events_naming
from governance.models.writes import REVIEWABLE
from governance.rules import contradictions, identifiers
from governance.rules import withdrawal as withdrawal_rules
from governance.rules.rendering import single_line
from governance.rules.text import keyed_digest, lexical_signature, statement_fingerprint
from governance.services import audit, history, session_blocks


class FactStateError(Exception):
    """The fact is not in a state that allows this change."""


def enqueue_embedding(fact_id: int) -> None:
    """Queue the new fact's embedding for when this transaction commits.

    Robust: the fact is already committed when the broker is asked to take the
    task, so a broker that is down must not turn an accepted write into an
    error (Django logs the failure). The row itself is the outbox: an active
    fact without a vector is found by the embed_missing_facts sweep, which
    enqueues it again once the broker is back (docs/operations.md). The facts
    of a moment's commits go in one task (governance/gathering.py).
    """
    transaction.on_commit(lambda: _embeddings.add(fact_id), robust=True)


# Facts per embedding task from a batch of writes: one model call each, well
# inside the task's time limit even on a loaded worker.
EMBED_TASK_FACTS = 100


def enqueue_embeddings(fact_ids: list[int]) -> None:
    """``enqueue_embedding`` for many facts, one task per EMBED_TASK_FACTS (a batch of writes).

    Just as robust: the rows stay the outbox, and the sweep finds any fact
    whose task was lost.
    """
    if fact_ids:
        transaction.on_commit(functools.partial(_send_embeddings, list(fact_ids)), robust=True)


def _send_embeddings(fact_ids: list[int]) -> None:
    """One ``embed_fact`` task for one fact, else one ``embed_facts`` per EMBED_TASK_FACTS."""
    from governance.tasks import embed_fact, embed_facts

    if len(fact_ids) == 1:
        embed_fact.delay(fact_ids[0])
        return
    for start in range(0, len(fact_ids), EMBED_TASK_FACTS):
        embed_facts.delay(fact_ids[start : start + EMBED_TASK_FACTS])


# The new facts of a moment's commits, embedded by one task (governance/gathering.py).
_embeddings: Gathering[int] = Gathering("embedding", _send_embeddings)


def supersede_fact(
    old: Fact, new: Fact, *, reason: str, decided_by: str, write: Write | None = None
) -> Supersession:
    """old -> new (R6): the old fact stays in history, marked superseded with valid_to set.

    The new fact is activated here, after the old one steps aside, so callers
    create it inactive.
    """
    now = timezone.now()
    old.status = "superseded"
    old.status_reason = reason
    old.status_changed_at = now
    # The old value stopped being true when the new one started.
    end = new.valid_from or now
    if old.valid_from is not None and end <= old.valid_from:
        end = now
    old.valid_to = end if old.valid_to is None or old.valid_to > end else old.valid_to
    old.save(update_fields=["status", "status_reason", "status_changed_at", "valid_to"])
    # Only now may the new fact be active: one active fact per key (R6).
    if new.status != "active":
        new.status = "active"
        new.status_reason = ""
        new.status_changed_at = now
        new.save(update_fields=["status", "status_reason", "status_changed_at"])
    link = Supersession.objects.create(
        old_fact=old, new_fact=new, reason=reason, decided_by=decided_by, write=write
    )
    _invalidate_session_blocks([old.pk])
    audit.record(
        old.project,
        "fact.superseded",
        old,
        reason=reason,
        data={"new_fact": new.pk, "decided_by": decided_by, "write": write.pk if write else None},
    )
    return link


def corroborate_fact(
    fact: Fact, *, observed_at: datetime, write: Write | None = None, independent: bool = True
) -> Fact:
    """A repeat of an active fact strengthens it instead of adding a copy (R9 moves last_verified_at).

    Only independent evidence strengthens it (rules/supersession.py:
    is_independent_evidence); an echo is recorded as a sighting and changes
    neither freshness nor confidence.
    """
    changed = []
    if independent and fact.confidence == "unverified":
        fact.confidence = "corroborated"
        changed.append("confidence")
    if independent and observed_at > fact.last_verified_at:
        fact.last_verified_at = min(observed_at, timezone.now())
        changed.append("last_verified_at")
    if changed:
        fact.save(update_fields=changed)
    audit.record(
        fact.project,
        "fact.corroborated" if independent else "fact.sighted",
        fact,
        data={"write": write.pk if write else None, "changed": changed},
    )
    return fact


def record_late_observation(late: Fact, current: Fact, *, write: Write | None = None) -> Supersession:
    """An observation older than the active fact for its key goes into history behind it (R6).

    It never replaces the newer observation: it is recorded as already
    superseded by it, valid until the newer one was observed.
    """
    now = timezone.now()
    late.status = "superseded"
    late.status_reason = (
        f"Observed {late.source_observed_at:%Y-%m-%d %H:%M}, before the current fact {current.pk} "
        f"({current.source_observed_at:%Y-%m-%d %H:%M}); kept in history behind it."
    )
    late.status_changed_at = now
    end = current.source_observed_at
    if late.valid_from is None or late.valid_from < end:
        late.valid_to = end if late.valid_to is None or late.valid_to > end else late.valid_to
    late.save(update_fields=["status", "status_reason", "status_changed_at", "valid_to"])
    link = Supersession.objects.create(
        old_fact=late,
        new_fact=current,
        reason=late.status_reason,
        decided_by="rule:R6",
        write=write,
    )
    audit.record(
        late.project,
        "fact.superseded",
        late,
        reason=late.status_reason,
        data={"new_fact": current.pk, "decided_by": "rule:R6", "write": write.pk if write else None},
    )
    return link


@transaction.atomic
def verify_fact(fact: Fact, *, user: Any, reason: str) -> Fact:
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.status != "active":
        raise FactStateError("Only active facts can be verified.")
    fact.confidence = "verified"
    fact.last_verified_at = timezone.now()
    fact.save(update_fields=["confidence", "last_verified_at"])
    audit.record(fact.project, "fact.verified", fact, reason=reason, actor_user=user)
    return fact


@transaction.atomic
def change_authority(fact: Fact, *, authority: int, user: Any, reason: str) -> Fact:
    """R4: only a reviewer changes authority (the view checks the role)."""
    if not 1 <= authority <= 5:
        raise FactStateError("Authority runs from 1 to 5.")
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.status in ("withdrawn",):
        raise FactStateError("A withdrawn fact has nothing left to re-rate.")
    audit.change_field(
        fact.project, "fact.authority_changed", fact, "authority", authority, reason=reason, actor_user=user
    )
    # Below the floor it may no longer be injected; above, the cached tag is out of date.
    _invalidate_session_blocks([fact.pk])
    return fact


class WithdrawalRefused(Exception):
    """An agent asked to withdraw something that is not its to withdraw (issue 19 item 1)."""

    def __init__(self, refusal: withdrawal_rules.Refusal) -> None:
        super().__init__(refusal.message)
        self.code = refusal.code


@transaction.atomic
def withdraw_fact(fact: Fact, *, reason: str, actor: str, user: Any = None) -> Tombstone:
    """R8 withdrawal by a person (console, governance API): erase every copy, evidence included.

    Erasing the evidence of a blocked write is a reviewer's decision; the
    audit entry records it as such (``evidence_erased``).
    """
    return _withdraw(fact.pk, reason=reason, actor=actor, user=user, by_agent=False)


@transaction.atomic
def withdraw_on_request(agent: Agent, fact: Fact, *, reason: str) -> Tombstone:
    """R8 withdrawal by an agent, on the request of the person the fact is about.

    The caller has checked that the agent may see the fact and named its
    principal; the rules on what an agent may withdraw are checked here, under
    the lock. Quarantined and rejected copies stay for a reviewer.
    """
    return _withdraw(
        fact.pk,
        reason=withdrawal_rules.agent_reason(reason),
        actor=f"agent:{agent.slug}",
        user=None,
        by_agent=True,
    )


def _withdraw(fact_id: int, *, reason: str, actor: str, user: Any, by_agent: bool) -> Tombstone:
    """Erase the statement from every copy for the principal, keep tombstones that block re-learning.

    A copy is a fact of the same project and principal (or project-level like
    this one) whose keyed normalised fingerprint matches, in any status, and
    every write that asserted it. Each erased fact loses its statement and
    embedding, in its own row, the writes that proposed it, the history rows
    and any retrieval text that injected it; findings elsewhere that quote it
    are scrubbed. The audit chain only ever held a keyed digest, so it stays
    verifiable.
    """
    key = settings.TOMBSTONE_KEY.encode()
    base = Fact.objects.filter(pk=fact_id).values("project_id", "principal_id", "statement", "fingerprint")
    first = base.get()
    fingerprints = {first["fingerprint"]}
    if first["statement"]:
        fingerprints.add(statement_fingerprint(first["statement"], key))
    # The same person, or project-level like this fact (NULL never equals NULL in SQL).
    same_principal = (
        Q(principal_id=first["principal_id"])
        if first["principal_id"] is not None
        else Q(principal__isnull=True)
    )
    scope = Q(project_id=first["project_id"], fingerprint__in=fingerprints) & same_principal
    matching = Fact.objects.filter(Q(pk=fact_id) | scope)
    # Lock order: the writes, then the facts, as a review decision takes them
    # (its write, then its fact), so a withdrawal and an approval racing over
    # one copy wait for each other instead of deadlocking. of=("self",):
    # locking the joined project row would serialise the whole project.
    locked = list(
        Write.objects.select_for_update(of=("self",))
        .filter(
            (Q(project_id=first["project_id"], fingerprint__in=fingerprints) & same_principal)
            | Q(fact__in=matching.values("pk"))
            | Q(corroborated__in=matching.values("pk"))
        )
        .order_by("pk")
    )
    # Writes already erased by an earlier withdrawal have nothing left to keep or erase.
    writes = [w for w in locked if w.statement]
    facts = list(
        matching.select_for_update(of=("self",))
        .select_related("project")
        .filter(Q(pk=fact_id) | ~Q(status="withdrawn"))
        .order_by("pk")
    )
    fact = next(f for f in facts if f.pk == fact_id)
    copies = [f for f in facts if f.pk != fact_id]
    # Withdrawn already: a person may still erase the copies an agent's
    # withdrawal left for review (the evidence of blocked writes).
    already = fact.status == "withdrawn"
    if already and (by_agent or not (copies or writes)):
        raise FactStateError("This fact was already withdrawn.")
    if by_agent:
        refusal = withdrawal_rules.agent_refusal(
            status=fact.status, source_type=fact.source_type, has_principal=fact.principal_id is not None
        )
        if refusal is not None:
            raise WithdrawalRefused(refusal)
    kept_facts = [f for f in copies if withdrawal_rules.keeps_copy(f.status, by_agent=by_agent)]
    erased_facts = [*([] if already else [fact]), *(f for f in copies if f not in kept_facts)]
    kept_fact_ids = {f.pk for f in kept_facts}
    kept_writes = sorted(
        w.pk
        for w in writes
        if withdrawal_rules.keeps_copy(w.status, by_agent=by_agent) or w.fact_id in kept_fact_ids
    )
    evidence_erased = sorted(
        w.pk for w in writes if w.pk not in kept_writes and w.status in withdrawal_rules.EVIDENCE_STATUSES
    )
    # A reason such as "forget that I ..." may repeat the statement, and the
    # reason goes into the audit chain, which can never be erased.
    statements = [f.statement for f in facts] + [w.statement for w in writes]
    reason = history.scrub(
        reason, sorted({q for s in statements for q in history.quoted_forms(s)}, key=len, reverse=True)
    )
    # Writes that asserted the statement but whose own fact is not erased here
    # (turned away without a fact, or approved with an edit): their text goes too.
    owned = set(
        Write.objects.filter(Q(fact__in=erased_facts) | Q(corroborated__in=erased_facts)).values_list(
            "pk", flat=True
        )
    )
    stray = sorted(w.pk for w in writes if w.pk not in owned and w.pk not in kept_writes)
    now = timezone.now()
    # The append-only history accepts the erasing UPDATEs below only once this
    # transaction holds an erasure grant, recorded in the audit trail (R15).
    history.open_erasure(
        fact.project,
        fact,
        reason=reason,
        actor=actor,
        actor_user=user,
        data={"copies": [f.pk for f in erased_facts if f is not fact], "writes": [w.pk for w in writes]},
    )
    if already:
        _erase_left_behind(fact, erased_facts, stray, writes, reason=reason, actor=actor, user=user, now=now)
        return fact.tombstone
    tombstones = [
        _withdraw_one(
            erased,
            reason=reason,
            actor=actor,
            user=user,
            now=now,
            key=key,
            keep_writes=kept_writes,
            extra_writes=stray if erased is fact else [],
            context=(
                {
                    "copies_withdrawn": [f.pk for f in erased_facts if f is not fact],
                    "evidence_kept": kept_writes,
                    "evidence_erased": evidence_erased,
                }
                if erased is fact
                else {"withdrawn_with": fact.pk}
            ),
        )
        for erased in erased_facts
    ]
    _invalidate_session_blocks([f.pk for f in erased_facts])
    _mark_kept_evidence(kept_writes, tombstones[0])
    return tombstones[0]


def _withdraw_one(
    fact: Fact,
    *,
    reason: str,
    actor: str,
    user: Any,
    now: datetime,
    key: bytes,
    keep_writes: list[int],
    extra_writes: list[int],
    context: dict[str, Any],
) -> Tombstone:
    """Erase one locked fact and what copied it; its tombstone and audit entry."""
    statement = fact.statement
    fingerprint = statement_fingerprint(statement, key) if statement else fact.fingerprint
    tombstone = Tombstone.objects.create(
        project=fact.project,
        fact=fact,
        reason=reason,
        actor=actor,
        fingerprint=fingerprint,
        value_digests=sorted(identifiers.value_digests(statement, key)) if statement else [],
    )
    previous_status = fact.status
    fact.status = "withdrawn"
    fact.status_reason = reason
    fact.status_changed_at = now
    fact.statement = ""
    # What the statement claimed repeats its values ("lives in Leeds").
    fact.claims = None
    fact.embedding = None
    fact.embedded_at = None
    fact.meaning_check_pending = False  # nothing left to read
    fact.lexical_signature = 0  # worked out from the statement, which is gone
    # R17's check lists what a summary dropped from its source: content too.
    fact.summary_check = None
    # The summarised conversation itself (kept out of history, so this is its only copy).
    fact.summary_source = None
    # Validity ends now, unless it already ended or had not begun (valid_from < valid_to).
    if (fact.valid_to is None or fact.valid_to > now) and (fact.valid_from is None or fact.valid_from < now):
        fact.valid_to = now
    fact.save()
    erased = history.erase_everywhere(fact, statement, keep=keep_writes, extra=extra_writes)
    # The resume hint was written with the summary, from the same conversation:
    # forgetting the summary and still injecting "Last session: ..." would not be forgetting.
    hinted = list(
        Session.objects.filter(summary_fact=fact).exclude(resume_hint="").values_list("pk", flat=True)
    )
    Session.objects.filter(pk__in=hinted).update(resume_hint="")
    session_blocks.invalidate_hints(hinted)
    flagged = _flag_derived_summaries(fact)
    # A pending write of this fact has nothing left to review, and approving it
    # would bring back an empty active fact.
    closed = list(
        Write.objects.filter(pk__in=erased.own_writes, status__in=REVIEWABLE).values_list("pk", flat=True)
    )
    Write.objects.filter(pk__in=closed).update(status="rejected", decided_at=now)
    audit.record(
        fact.project,
        "fact.withdrawn",
        fact,
        reason=reason,
        actor=actor,
        actor_user=user,
        data={
            "previous_status": previous_status,
            "tombstone": tombstone.pk,
            "statement_digest": fact.statement_digest,
            "writes_erased": erased.own_writes,
            "writes_scrubbed": erased.quoting_writes,
            "writes_closed": closed,
            "retrievals_redacted": sorted(erased.retrievals),
            # Each redacted event's new seal: verify_audit accepts the redacted
            # text, and this entry says who changed it and why.
            "retrieval_seals": {str(i): seal for i, seal in sorted(erased.retrievals.items())},
            "summaries_flagged": flagged,
            **context,
        },
    )
    return tombstone


def _erase_left_behind(
    fact: Fact,
    copies: list[Fact],
    stray: list[int],
    writes: list[Write],
    *,
    reason: str,
    actor: str,
    user: Any,
    now: datetime,
) -> None:
    """A person erases what an agent's withdrawal of ``fact`` kept for review."""
    key = settings.TOMBSTONE_KEY.encode()
    for copy in copies:
        _withdraw_one(
            copy,
            reason=reason,
            actor=actor,
            user=user,
            now=now,
            key=key,
            keep_writes=[],
            extra_writes=[],
            context={"withdrawn_with": fact.pk},
        )
    statements = {w.statement for w in writes if w.pk in stray}
    erased: list[int] = []
    resealed: dict[int, str] = {}
    for statement in sorted(statements):
        same = [w.pk for w in writes if w.pk in stray and w.statement == statement]
        done = history.erase_everywhere(fact, statement, keep=[], extra=same)
        erased += done.own_writes
        resealed |= done.retrievals
    closed = list(Write.objects.filter(pk__in=stray, status__in=REVIEWABLE).values_list("pk", flat=True))
    Write.objects.filter(pk__in=closed).update(status="rejected", decided_at=now)
    _invalidate_session_blocks([c.pk for c in copies])
    audit.record(
        fact.project,
        "fact.evidence_erased",
        fact,
        reason=reason,
        actor=actor,
        actor_user=user,
        data={
            "copies_withdrawn": [c.pk for c in copies],
            "writes_erased": sorted(set(erased) & set(stray)),
            "writes_closed": closed,
            "retrieval_seals": {str(i): seal for i, seal in sorted(resealed.items())},
        },
    )


WITHDRAWN_SINCE_CHECK = "withdrawn_since"


def _mark_kept_evidence(write_ids: list[int], tombstone: Tombstone) -> None:
    """Tell the reviewer why a quarantined copy an agent could not erase can no longer be approved."""
    finding = {
        "check": WITHDRAWN_SINCE_CHECK,
        "severity": "high",
        "detail": f"The person asked for this to be forgotten after it was written (tombstone "
        f"{tombstone.pk}), so it cannot be approved. Reject it, or withdraw its fact to erase it.",
    }
    for write in Write.objects.filter(pk__in=write_ids, status__in=REVIEWABLE).order_by("pk"):
        if any(f.get("check") == WITHDRAWN_SINCE_CHECK for f in write.findings if isinstance(f, dict)):
            continue
        write.findings = [*write.findings, finding]
        write.save(update_fields=["findings"])


def _invalidate_session_blocks(fact_ids: list[int]) -> int:
    """R12's cached blocks must not keep serving a fact that may no longer be injected (R2)."""
    return session_blocks.invalidate(fact_ids)


def _flag_derived_summaries(fact: Fact) -> list[int]:
    """Summaries of sessions that were given this fact may repeat it: mark them for review."""
    sessions = RetrievalEvent.objects.filter(pk__in=events_naming(fact.pk, selected=True)).values(
        "session_id"
    )
    session_summary_ids = Session.objects.filter(pk__in=sessions, summary_fact__isnull=False).values(
        "summary_fact_id"
    )
    summaries = Fact.objects.filter(pk__in=session_summary_ids, status="active").order_by("pk")
    flagged = []
    for summary in summaries.select_for_update(of=("self",)).select_related("project"):
        summary.confidence = "disputed"
        summary.status_reason = f"Derived from withdrawn fact {fact.pk}; needs review."
        fields = ["confidence", "status_reason"]
        # Back to the review queue, out of every context until a person looks,
        # when its write was never decided (a decided write cannot be decided twice).
        undecided = Write.objects.filter(fact=summary, status="active", decisions__isnull=True)
        requeued = list(undecided.values_list("pk", flat=True))
        if requeued:
            summary.status = "pending_review"
            summary.status_changed_at = timezone.now()
            fields += ["status", "status_changed_at"]
            finding = {
                "check": "derived_from_withdrawn",
                "severity": "medium",
                "detail": f"This summary was made from a session that was given fact {fact.pk}, "
                "which has since been withdrawn; check that it does not repeat it.",
            }
            for write in Write.objects.filter(pk__in=requeued):
                write.status = "pending_review"
                write.findings = [*write.findings, finding]
                write.save(update_fields=["status", "findings"])
        summary.save(update_fields=fields)
        audit.record(
            summary.project,
            "fact.flagged",
            summary,
            reason=summary.status_reason,
            data={"requeued": requeued},
        )
        flagged.append(summary.pk)
    return flagged


EXPIRY_ACTOR = "system:expiry"
EXPIRY_BATCH = 500


def expire_due_facts(now: datetime | None = None, *, batch_size: int = EXPIRY_BATCH) -> int:
    """R8 expiration: mark active facts whose validity ended. Idempotent.

    Retrieval already excludes them by ``valid_to`` before this runs (R2); the
    status makes the ending visible and frees the key for new evidence.
    """
    now = now or timezone.now()
    expired = 0
    while True:
        with transaction.atomic():
            # skip_locked: a concurrent sweep, or a withdrawal holding the row,
            # is not waited for; anything skipped is picked up on the next run.
            due = list(
                Fact.objects.select_for_update(of=("self",), skip_locked=True)
                .select_related("project")
                .filter(status="active", valid_to__isnull=False, valid_to__lte=now)
                .order_by("valid_to", "pk")[:batch_size]
            )
            if not due:
                break
            for fact in due:
                assert fact.valid_to is not None
                fact.status = "expired"
                fact.status_reason = f"Validity ended {fact.valid_to.isoformat()}"
                fact.status_changed_at = now
                fact.save(update_fields=["status", "status_reason", "status_changed_at"])
                audit.record(
                    fact.project,
                    "fact.expired",
                    fact,
                    reason=fact.status_reason,
                    actor=EXPIRY_ACTOR,
                    data={"valid_to": fact.valid_to.isoformat()},
                )
            _invalidate_session_blocks([fact.pk for fact in due])
            expired += len(due)
    return expired


ENDABLE = ("active", "pending_review", "quarantined")


def end_scope(facts: QuerySet[Fact], *, reason: str, actor_label: str) -> int:
    """R8 end of scope: the facts stay for audit and are never injected again."""
    now = timezone.now()
    ended: list[int] = []
    with transaction.atomic():
        # In id order, so two endings over overlapping sets lock in the same order.
        rows = (
            facts.filter(status__in=ENDABLE)
            .select_for_update(of=("self",))
            .select_related("project")
            .order_by("pk")
        )
        for fact in rows:
            previous = fact.status
            fact.status = "out_of_scope"
            fact.status_reason = reason
            fact.status_changed_at = now
            fact.save(update_fields=["status", "status_reason", "status_changed_at"])
            audit.record(
                fact.project,
                "fact.out_of_scope",
                fact,
                reason=reason,
                actor=actor_label,
                data={"previous_status": previous},
            )
            ended.append(fact.pk)
        _invalidate_session_blocks(ended)
    return len(ended)


def statement_digest(text: str) -> str:
    """The one digest of erasable text kept on facts, in history and in the audit chain (R8, R15).

    Keyed with the tombstone key (governance.rules.text.keyed_digest): whoever
    holds an export cannot confirm a guessed statement after it was withdrawn.
    """
    return keyed_digest(text, settings.TOMBSTONE_KEY.encode())


CLAIMS_BATCH = 1000
# Only where the statement and key are still those read: a fact edited or
# erased meanwhile keeps what its own change stored (none, once erased: R8).
_STORE_CLAIMS = (
    "UPDATE governance_fact f SET claims = v.claims"
    " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[]) v(id, statement, key, claims)"
    " WHERE f.id = v.id AND f.statement = v.statement AND f.key IS NOT DISTINCT FROM v.key"
)


@dataclass(frozen=True)
class StoredClaims:
    stored: int  # facts whose claims were missing or outdated, and are now stored
    current: int  # facts whose stored claims were already this reader's


def store_claims(*, batch_size: int = CLAIMS_BATCH) -> StoredClaims:
    """Store the claims of every fact that has none, or whose stored claims another
    statement, key or reader version made (``contradictions.stored_claims``).

    Facts written since migration 0047 have theirs; this fills older ones, and
    renews all of them after a change of ``CLAIMS_VERSION``. One transaction
    per batch, in id order, so a large table is never locked at once. Erased
    statements are left without claims (R8). Not audited, as an index is not:
    the claims say nothing the statement does not, and retrieval decides the
    same with or without them.
    """
    stored = current = 0
    after = 0
    while True:
        with transaction.atomic():
            rows = list(
                Fact.objects.filter(pk__gt=after)
                .exclude(statement="")
                .order_by("pk")
                .values_list("pk", "statement", "key", "claims")[:batch_size]
            )
            if not rows:
                break
            after = rows[-1][0]
            changed = []
            for pk, statement, key, claims in rows:
                if not contradictions.holds_claims_of(claims, statement, key):
                    changed.append((pk, statement, key, contradictions.stored_claims(statement, key)))
            if changed:
                with connection.cursor() as cursor:
                    cursor.execute(_STORE_CLAIMS, [list(column) for column in zip(*changed, strict=True)])
                    stored += cursor.rowcount
            current += len(rows) - len(changed)
    return StoredClaims(stored=stored, current=current)


DISPUTE_CHECK = "disputed"
MAX_DISPUTE_CHARS = 2000


@transaction.atomic
def dispute_fact(agent: Agent, fact: Fact, *, words: str) -> Write:
    """The person says "that's wrong or outdated": the fact leaves every context until a reviewer decides.

    The fact becomes ``pending_review`` (so R2 keeps it out, and every cached
    session-start block holding it is dropped) with confidence ``disputed``,
    and a write carrying the person's words joins the review queue. The
    reviewer's approval puts the fact back as it was; a rejection removes it
    from memory, kept in history (services/reviews.py ``decide``).
    """
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.status != "active":
        raise FactStateError(
            f"Fact {fact.pk} is {fact.status.replace('_', ' ')}; only current memory can be disputed."
        )
    now = timezone.now()
    previous_confidence = fact.confidence
    fact.status = "pending_review"
    fact.status_reason = "The person says this is wrong or outdated"
    fact.status_changed_at = now
    fact.confidence = "disputed"
    fact.save(update_fields=["status", "status_reason", "status_changed_at", "confidence"])
    _invalidate_session_blocks([fact.pk])
    findings = [
        {
            "check": DISPUTE_CHECK,
            "severity": "high",
            "detail": (
                "The person this is about says it is wrong or outdated: "
                f"\u201c{single_line(words)}\u201d. "
                "Approve to keep it as it is; reject to take it out of memory."
            ),
        }
    ]
    write = Write.objects.create(
        project=fact.project,
        agent=agent,
        principal=fact.principal,
        kind=fact.kind,
        key=fact.key,
        statement=fact.statement,
        fingerprint=fact.fingerprint,
        source_type="user_statement",
        source_ref=f"dispute:fact-{fact.pk}",
        source_observed_at=now,
        authority=fact.authority,
        findings=findings,
        risk=min(99, 3 * 3 + 1),
        outcome="pending_review",
        status="pending_review",
        fact=fact,
        created_at=now,
    )
    audit.record(
        fact.project,
        "fact.disputed",
        fact,
        reason="The person says this is wrong or outdated",
        actor=f"agent:{agent.slug}",
        data={"write": write.pk, "previous_confidence": previous_confidence},
    )
    return write


SIGN_BATCH = 2000


def sign_statements(*, batch_size: int = SIGN_BATCH) -> int:
    """Give facts stored before lexical signatures existed their signature; how many were signed.

    Migration 0046 added the column with 0, which the write path always
    compares, so nothing is wrong before this runs: a write just prepares
    those facts in Python as it did before. Batches in their own transactions,
    by id, each row read once (a statement too long to sign stays 0); a row a
    write or a withdrawal changed meanwhile is left as that change set it.
    """
    key = settings.TOMBSTONE_KEY.encode()
    signed = after_id = 0
    while True:
        with transaction.atomic():
            rows = list(
                Fact.objects.filter(lexical_signature=0, id__gt=after_id)
                .exclude(statement="")
                .order_by("id")
                .values_list("id", "statement")[:batch_size]
            )
            if not rows:
                return signed
            ids = [pk for pk, _ in rows]
            signatures = [lexical_signature(statement, key) for _, statement in rows]
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE governance_fact f SET lexical_signature = s.signature"
                    " FROM unnest(%s::bigint[], %s::bigint[]) s(id, signature)"
                    " WHERE f.id = s.id AND f.lexical_signature = 0 AND s.signature <> 0",
                    [ids, signatures],
                )
                signed += cursor.rowcount
        after_id = ids[-1]
