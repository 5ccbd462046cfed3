"""State changes of facts: supersede, corroborate, verify, re-rate, and the three endings (R8)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from governance.models import Fact, RetrievalCandidate, RetrievalEvent, Session, Supersession, Tombstone, Write
from governance.models.history import ERASURE_SETTING
from governance.rules.text import statement_fingerprint
from governance.services import audit

ERASED = "[withdrawn]"


class FactStateError(Exception):
    """The fact is not in a state that allows this change."""


def enqueue_embedding(fact_id: int) -> None:
    from governance.tasks import embed_fact

    transaction.on_commit(lambda: embed_fact.delay(fact_id))


def supersede_fact(old: Fact, new: Fact, *, reason: str, decided_by: str, write: Write | None = None) -> Supersession:
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
    link = Supersession.objects.create(old_fact=old, new_fact=new, reason=reason, decided_by=decided_by, write=write)
    audit.record(
        old.project,
        "fact.superseded",
        old,
        reason=reason,
        data={"new_fact": new.pk, "decided_by": decided_by, "write": write.pk if write else None},
    )
    return link


def corroborate_fact(fact: Fact, *, observed_at: datetime, write: Write | None = None) -> Fact:
    """A repeat of an active fact strengthens it instead of adding a copy (R9 moves last_verified_at)."""
    changed = []
    if fact.confidence == "unverified":
        fact.confidence = "corroborated"
        changed.append("confidence")
    if observed_at > fact.last_verified_at:
        fact.last_verified_at = min(observed_at, timezone.now())
        changed.append("last_verified_at")
    if changed:
        fact.save(update_fields=changed)
    audit.record(
        fact.project, "fact.corroborated", fact, data={"write": write.pk if write else None, "changed": changed}
    )
    return fact


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
    old = fact.authority
    fact.authority = authority
    fact.save(update_fields=["authority"])
    audit.record(fact.project, "fact.authority_changed", fact, reason=reason, actor_user=user, data={"from": old, "to": authority})
    return fact


@transaction.atomic
def withdraw_fact(fact: Fact, *, reason: str, actor: str, user: Any = None) -> Tombstone:
    """R8 withdrawal: erase the content everywhere, keep a tombstone that blocks re-learning.

    The statement and its embedding are erased from the fact, the writes that
    proposed it, the history rows and any retrieval text that injected it. The
    audit chain only ever held its digest, so it stays verifiable.
    """
    fact = Fact.objects.select_for_update().select_related("project").get(pk=fact.pk)
    if fact.status == "withdrawn":
        raise FactStateError("This fact was already withdrawn.")
    statement = fact.statement
    now = timezone.now()
    tombstone = Tombstone.objects.create(
        project=fact.project,
        fact=fact,
        reason=reason,
        actor=actor,
        fingerprint=statement_fingerprint(statement, settings.TOMBSTONE_KEY.encode()) if statement else fact.fingerprint,
    )
    previous_status = fact.status
    fact.status = "withdrawn"
    fact.status_reason = reason
    fact.status_changed_at = now
    fact.statement = ""
    fact.embedding = None
    fact.embedded_at = None
    fact.valid_to = fact.valid_to if fact.valid_to and fact.valid_to < now else now
    fact.save()
    _erase_everywhere(fact, statement)
    _invalidate_session_blocks(fact)
    flagged = _flag_derived_summaries(fact)
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
            "summaries_flagged": flagged,
        },
    )
    return tombstone


def _erase_everywhere(fact: Fact, statement: str) -> None:
    """Blank the statement in every row that copied it (history included)."""
    with connection.cursor() as cursor:
        # Lets the append-only triggers accept these UPDATEs, for this transaction only.
        cursor.execute("SELECT set_config(%s, 'on', true)", [ERASURE_SETTING])
        cursor.execute("UPDATE governance_factevent SET statement = '' WHERE pgh_obj_id = %s", [fact.pk])
        writes = list(Write.objects.filter(Q(fact=fact) | Q(corroborated=fact)).values_list("pk", flat=True))
        if writes:
            Write.objects.filter(pk__in=writes).update(statement="", response=None)
            cursor.execute(
                "UPDATE governance_writeevent SET statement = '', response = NULL WHERE pgh_obj_id = ANY(%s)",
                [writes],
            )
            cursor.execute(
                "UPDATE governance_reviewdecision SET edited_statement = '' WHERE write_id = ANY(%s)", [writes]
            )
            cursor.execute(
                "UPDATE governance_reviewdecisionevent SET edited_statement = '' WHERE pgh_obj_id IN "
                "(SELECT id FROM governance_reviewdecision WHERE write_id = ANY(%s))",
                [writes],
            )
        if statement:
            events = list(
                RetrievalCandidate.objects.filter(fact=fact, decision="selected").values_list("event_id", flat=True)
            )
            for event in RetrievalEvent.objects.filter(pk__in=events).only("pk", "context"):
                RetrievalEvent.objects.filter(pk=event.pk).update(context=event.context.replace(statement, ERASED))
        cursor.execute("SELECT set_config(%s, 'off', true)", [ERASURE_SETTING])


def _invalidate_session_blocks(fact: Fact) -> None:
    """R12's cached blocks must not keep serving a withdrawn fact."""
    Session.objects.filter(static_block_fact_ids__contains=[fact.pk]).update(
        static_block=None, static_block_tokens=0, static_block_fact_ids=[], static_block_policy=None
    )


def _flag_derived_summaries(fact: Fact) -> list[int]:
    """Summaries of sessions that were given this fact may repeat it: mark them for review."""
    sessions = RetrievalCandidate.objects.filter(fact=fact, decision="selected").values("event__session_id")
    session_summary_ids = list(
        Session.objects.filter(pk__in=sessions, summary_fact__isnull=False).values_list("summary_fact_id", flat=True)
    )
    summaries = Fact.objects.filter(pk__in=session_summary_ids, status="active")
    flagged = []
    for summary in summaries.select_for_update():
        summary.confidence = "disputed"
        summary.status_reason = f"Derived from withdrawn fact {fact.pk}; needs review."
        summary.save(update_fields=["confidence", "status_reason"])
        audit.record(summary.project, "fact.flagged", summary, reason=summary.status_reason)
        flagged.append(summary.pk)
    return flagged


def expire_due_facts(now: datetime | None = None) -> int:
    """R8 expiration: mark active facts whose validity ended. Idempotent."""
    now = now or timezone.now()
    expired = 0
    due = Fact.objects.filter(status="active", valid_to__isnull=False, valid_to__lte=now).values_list("pk", flat=True)
    for fact_id in list(due[:5000]):
        with transaction.atomic():
            fact = Fact.objects.select_for_update().filter(pk=fact_id, status="active").first()
            if fact is None or fact.valid_to is None or fact.valid_to > now:
                continue
            fact.status = "expired"
            fact.status_reason = f"Validity ended {fact.valid_to.isoformat()}"
            fact.status_changed_at = now
            fact.save(update_fields=["status", "status_reason", "status_changed_at"])
            audit.record(fact.project, "fact.expired", fact, reason=fact.status_reason)
            expired += 1
    return expired


def end_scope(facts: Any, *, reason: str, actor_label: str) -> int:
    """R8 end of scope: the facts stay for audit and are never injected again."""
    now = timezone.now()
    ended = 0
    for fact in facts.filter(status__in=["active", "pending_review", "quarantined"]).select_for_update():
        fact.status = "out_of_scope"
        fact.status_reason = reason
        fact.status_changed_at = now
        fact.save(update_fields=["status", "status_reason", "status_changed_at"])
        audit.record(fact.project, "fact.out_of_scope", fact, reason=reason, actor=actor_label)
        ended += 1
    return ended


def statement_digest(statement: str) -> str:
    return hashlib.sha256(statement.encode()).hexdigest()
