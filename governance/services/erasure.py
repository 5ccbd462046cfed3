"""Forgetting a person (issue 18): erase everything held about one principal in a project.

Three state changes, each in its own transaction with its own audit entry:

- ``start_erasure``: the request. The person's external id is replaced by its
  keyed pseudonym at once (no agent can reach their memory by it from then
  on) and a job is queued.
- ``erase_fact_batch`` (repeated): a batch of the person's facts, in every
  status and kind, loses its statement, vector and summary material in the
  row and in its history; each gets a tombstone (R8), and the stored
  retrieval text that carried it loses those lines and is re-sealed.
- ``finish_erasure``: their writes (text, findings, stored replies, history),
  review notes and edits, the rest of their stored retrieval text (the
  question asked, the person's section, resume hint lines), resume hints,
  cached session blocks; then the receipt entry, which the job's result
  copies.

The principal row stays, under its pseudonym, with every fact, write and
event row: counts and the audit chain stay whole, and nothing in the chain
was ever erasable content (keyed digests only). Each step is idempotent: it
picks only what is not erased yet, so a redelivered task resumes, and a
second request erases nothing new and says so in its receipt.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Replace
from django.utils import timezone

from governance.models import (
    Agent,
    Fact,
    Job,
    Principal,
    RetrievalEvent,
    ReviewDecision,
    Session,
    SessionBlock,
    Tombstone,
    Write,
)
from governance.models.jobs import JobStatus
from governance.models.writes import REVIEWABLE
from governance.rules import erasure as rules
from governance.rules.text import statement_fingerprint
from governance.selectors import erasures as selectors
from governance.services import audit, checkpoints, session_blocks
from governance.services.history import erase_rows, open_erasure, quoted_forms

logger = logging.getLogger(__name__)

BATCH = 500
ERASED_REASON = "Erased: the person asked for everything about them to be forgotten."
MAX_REASON = 2000


class ErasureError(Exception):
    """The request cannot be taken as it is: ``field`` names what to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _free_pseudonym(principal: Principal) -> str:
    """The pseudonym for this row: the keyed stem, or the stem and the row id when the
    stem is taken (the same id was forgotten before, then mentioned again)."""
    stem = selectors.pseudonym_of(principal.external_id)
    taken = Principal.objects.filter(project_id=principal.project_id, external_id=stem).exclude(
        pk=principal.pk
    )
    return f"{stem}-{principal.pk}" if taken.exists() else stem


@transaction.atomic
def start_erasure(
    principal: Principal, *, reason: str, actor: str, user: Any = None, agent: Agent | None = None
) -> Job:
    """Queue the erasure of everything about ``principal``; the job carries progress and the receipt."""
    reason = (reason or "").strip()
    if not reason:
        raise ErasureError(
            "reason", "Say why this person is being forgotten (for example, the request's ticket)."
        )
    if len(reason) > MAX_REASON:
        raise ErasureError("reason", f"Keep the reason under {MAX_REASON} characters.")
    # Lock the person: two requests at once queue one after the other, and the
    # second finds the pseudonym already in place.
    principal = Principal.objects.select_for_update().select_related("project").get(pk=principal.pk)
    external_id = principal.external_id
    already = rules.is_pseudonym(external_id)
    pseudonym = external_id if already else _free_pseudonym(principal)
    # The reason enters the audit chain, which is never erased: it must not name the person by id.
    if not already:
        reason = rules.scrub_identifier(reason, external_id, pseudonym)
    dry_run = selectors.inventory(principal)
    now = timezone.now()
    job = Job.objects.create(
        kind=rules.JOB_KIND,
        project=principal.project,
        agent=agent,
        created_by=user if getattr(user, "pk", None) else None,
        params={
            "principal": principal.pk,
            "pseudonym": pseudonym,
            # Needed to take the id out of source refs and request paths; dropped when the job ends.
            "external_id": "" if already else external_id,
            "reason": reason,
            "actor": actor,
            "requested_at": now.isoformat(),
            "dry_run": dry_run.counts,
        },
        progress_total=dry_run.total,
        result={"counts": rules.empty_counts(), "tombstones": [], "retrieval_seals": {}},
    )
    if not already:
        principal.external_id = pseudonym
        principal.save(update_fields=["external_id"])
    audit.record(
        principal.project,
        rules.START_ACTION,
        ("principal", principal.pk),
        reason=reason,
        actor=actor,
        actor_user=user,
        data={"job": str(job.pk), "principal": pseudonym, "dry_run": dry_run.counts},
    )
    transaction.on_commit(partial(_enqueue, job.pk))
    return job


def _enqueue(job_id: UUID) -> None:
    from governance.tasks import erase_principal

    erase_principal.delay(str(job_id))


def run(job_id: str | UUID) -> bool:
    """Run an erasure job to the end; False when there was nothing to do.

    Outside a transaction on purpose: each batch commits, so the job's
    progress moves for whoever watches it, and a redelivered task resumes
    where the last committed batch ended.
    """
    job = Job.objects.filter(pk=job_id, kind=rules.JOB_KIND).first()
    if job is None or job.is_finished:
        return False
    Job.objects.filter(pk=job.pk, status__in=[JobStatus.QUEUED, JobStatus.RUNNING]).update(
        status=JobStatus.RUNNING, started_at=timezone.now(), error=""
    )
    try:
        while erase_fact_batch(job.pk):
            pass
        while erase_write_batch(job.pk):
            pass
        finish_erasure(job.pk)
    except (OperationalError, InterfaceError):
        raise  # the database went away: the task retries, and resumes
    except Exception as exc:
        logger.exception("erasure job %s failed", job.pk)
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        return False
    return True


def _locked_job(job_id: UUID) -> Job:
    # One runner per job: a redelivered task waits for the batch in flight.
    return Job.objects.select_for_update().select_related("project").get(pk=job_id)


def _progress(job: Job, counts: dict[str, Any], tombstones: list[int], seals: dict[int, str]) -> None:
    result = dict(job.result or {})
    result["counts"] = rules.add_counts(result.get("counts", {}), counts)
    result["tombstones"] = [*result.get("tombstones", []), *tombstones]
    result["retrieval_seals"] = {**result.get("retrieval_seals", {}), **{str(k): v for k, v in seals.items()}}
    # An event redacted in several steps is one event erased from.
    result["counts"]["retrieval_events"] = len(result["retrieval_seals"])
    job.result = result
    job.progress_done = rules.total_items(result["counts"])
    job.save(update_fields=["result", "progress_done"])


def _open_history(job: Job, principal_id: int) -> None:
    """This transaction may blank history rows (recorded in the audit chain; docs/erasure.md)."""
    open_erasure(
        job.project,
        ("principal", principal_id),
        reason=str(job.params.get("reason", "")) or "Forgetting a person",
        data={"job": str(job.pk)},
        actor=str(job.params.get("actor", "")) or None,
        actor_user=job.created_by,
    )


@transaction.atomic
def erase_fact_batch(job_id: UUID, batch_size: int = BATCH) -> int:
    """Erase the next batch of the person's facts; how many (0 when none are left)."""
    job = _locked_job(job_id)
    principal_id = int(job.params["principal"])
    ids = list(
        selectors.facts_to_erase(principal_id).order_by("pk").values_list("pk", flat=True)[:batch_size]
    )
    if not ids:
        return 0
    _open_history(job, principal_id)
    # Lock order as a withdrawal and a review decision take them: the writes, then the facts.
    list(
        Write.objects.select_for_update(of=("self",))
        .filter(Q(fact__in=ids) | Q(corroborated__in=ids))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    facts = list(
        Fact.objects.select_for_update(of=("self",))
        .filter(pk__in=ids)
        .order_by("pk")
        .values("pk", "kind", "statement", "fingerprint")
    )
    key = settings.TOMBSTONE_KEY.encode()
    forms = sorted({form for f in facts for form in quoted_forms(f["statement"])}, key=len, reverse=True)
    seals = _redact_retrievals_of(ids, forms)
    tombstoned = set(Tombstone.objects.filter(fact_id__in=ids).values_list("fact_id", flat=True))
    actor = str(job.params.get("actor", ""))
    reason = str(job.params.get("reason", ""))
    created = Tombstone.objects.bulk_create(
        [
            Tombstone(
                project_id=job.project_id,
                fact_id=f["pk"],
                reason=reason,
                actor=actor,
                # Keyed and normalised, as withdrawal keeps it: it blocks the assertion, not one spelling.
                fingerprint=statement_fingerprint(f["statement"], key)
                if f["statement"]
                else f["fingerprint"],
            )
            for f in facts
            if f["pk"] not in tombstoned
        ]
    )
    now = timezone.now()
    external_id = str(job.params.get("external_id", ""))
    pseudonym = str(job.params["pseudonym"])
    Fact.objects.filter(pk__in=ids).update(
        status="withdrawn",
        status_reason=ERASED_REASON,
        status_changed_at=now,
        statement="",
        claims=None,
        embedding=None,
        embedded_at=None,
        meaning_check_pending=False,
        lexical_signature=0,
        summary_check=None,
        summary_source=None,
        # Validity ends now, unless it already ended or had not begun.
        valid_to=Case(
            When(
                (Q(valid_to__isnull=True) | Q(valid_to__gt=now))
                & (Q(valid_from__isnull=True) | Q(valid_from__lt=now)),
                then=Value(now),
            ),
            default=F("valid_to"),
        ),
    )
    erase_rows(
        "UPDATE governance_factevent SET statement = '', summary_check = NULL, status_reason = %s, "
        "source_ref = replace(source_ref, %s, %s) "
        "WHERE pgh_obj_id = ANY(%s) AND (statement <> '' OR summary_check IS NOT NULL OR status_reason <> %s "
        "OR strpos(source_ref, %s) > 0)",
        [ERASED_REASON, external_id or pseudonym, pseudonym, ids, ERASED_REASON, external_id or pseudonym],
    )
    dropped = session_blocks.invalidate(ids)
    counts = rules.empty_counts()
    counts["session_blocks"] = dropped
    for f in facts:
        counts["facts"][f["kind"]] += 1
    tombstone_ids = [t.pk for t in created]
    _progress(job, counts, tombstone_ids, seals)
    audit.record(
        job.project,
        "principal.erasure_batch",
        ("principal", principal_id),
        reason=reason,
        actor=actor,
        actor_user=job.created_by,
        data={
            "job": str(job.pk),
            "facts": ids,
            "tombstones": tombstone_ids,
            # Each redacted event's new seal, as a withdrawal lists them: the trail says who changed it.
            "retrieval_seals": {str(k): v for k, v in sorted(seals.items())},
        },
    )
    return len(ids)


def _scrub_refs(principal_id: int, external_id: str, pseudonym: str) -> None:
    """Source refs often embed the person's id (``chat:bot/<id>``): it gives way to the
    pseudonym in every fact and write of theirs and in their history, erased earlier or not."""
    if not external_id:
        return
    fact_ids = list(Fact.objects.filter(principal_id=principal_id).values_list("pk", flat=True))
    write_ids = list(Write.objects.filter(principal_id=principal_id).values_list("pk", flat=True))
    Fact.objects.filter(pk__in=fact_ids, source_ref__contains=external_id).update(
        source_ref=_replace(F("source_ref"), external_id, pseudonym)
    )
    Write.objects.filter(pk__in=write_ids, source_ref__contains=external_id).update(
        source_ref=_replace(F("source_ref"), external_id, pseudonym)
    )
    for table, ids in (("governance_factevent", fact_ids), ("governance_writeevent", write_ids)):
        erase_rows(
            f"UPDATE {table} SET source_ref = replace(source_ref, %s, %s) "
            "WHERE pgh_obj_id = ANY(%s) AND strpos(source_ref, %s) > 0",
            [external_id, pseudonym, ids, external_id],
        )


def _replace(field: F, old: str, new: str) -> Replace:
    return Replace(field, Value(old), Value(new))


def _redact_retrievals_of(fact_ids: list[int], forms: list[str]) -> dict[int, str]:
    """The stored text of retrievals that gave these facts, including later rounds of the
    same sessions, which re-served the cached block without selecting them again (R12)."""
    selected = RetrievalEvent.objects.filter(selected_fact_ids__overlap=fact_ids)
    sessions = selected.filter(session__isnull=False).values("session_id")
    events = RetrievalEvent.objects.filter(Q(pk__in=selected.values("pk")) | Q(session_id__in=sessions))
    changed: dict[int, str] = {}
    for pk, context in events.values_list("pk", "context").iterator(chunk_size=500):
        redacted = rules.redact_lines(context, forms)
        if redacted != context:
            changed[pk] = redacted
    return _store_redacted(changed, {})


def _store_redacted(contexts: dict[int, str], queries: dict[int, str]) -> dict[int, str]:
    """Write redacted text and re-seal it: the one legitimate edit of a sealed event."""
    ids = sorted(set(contexts) | set(queries))
    if not ids:
        return {}
    rows = RetrievalEvent.objects.filter(pk__in=ids).values_list(
        "pk", "project_id", "agent_id", "created_at", "query", "context", "candidate_data"
    )
    updates = []
    for pk, project_id, agent_id, created_at, query, context, candidates in rows:
        new_query = queries.get(pk, query)
        new_context = contexts.get(pk, context)
        seal = checkpoints.seal_retrieval(
            project_id, agent_id, created_at, new_query, new_context, candidates
        )
        updates.append((pk, new_query, new_context, seal))
    erase_rows(
        "UPDATE governance_retrievalevent AS t "
        "SET query = v.query, context = v.context, context_seal = v.seal "
        "FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS query, "
        "unnest(%s::text[]) AS context, unnest(%s::text[]) AS seal) AS v WHERE t.id = v.id",
        [[u[0] for u in updates], [u[1] for u in updates], [u[2] for u in updates], [u[3] for u in updates]],
    )
    return {u[0]: u[3] for u in updates}


def _erased_findings_sql(column: str) -> str:
    """SQL for a findings array with every detail (which quotes the statement) erased;
    check names and severities stay, they are not content."""
    return (
        "(SELECT COALESCE(jsonb_agg(e || jsonb_build_object('detail', %s::text)), '[]'::jsonb) "
        f"FROM jsonb_array_elements(CASE WHEN jsonb_typeof({column}) = 'array' THEN {column} "
        "ELSE '[]'::jsonb END) AS e WHERE jsonb_typeof(e) = 'object')"
    )


# The stored 201 body stays replayable for its Idempotency-Key; only its findings quote content.
_WRITE_ERASURE = (
    "SET statement = '', findings = {findings}, "
    "response = CASE WHEN jsonb_typeof(response) = 'object' "
    "THEN jsonb_set(response, '{{findings}}', {response_findings}) ELSE NULL END, "
    "source_ref = replace(source_ref, %s, %s)"
).format(
    findings=_erased_findings_sql("findings"), response_findings=_erased_findings_sql("response->'findings'")
)


@transaction.atomic
def erase_write_batch(job_id: UUID, batch_size: int = BATCH) -> int:
    """Erase the next batch of the person's writes, their history and review material."""
    job = _locked_job(job_id)
    principal_id = int(job.params["principal"])
    ids = list(
        Write.objects.select_for_update(of=("self",))
        .filter(pk__in=selectors.writes_to_erase(principal_id).order_by("pk").values("pk")[:batch_size])
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not ids:
        return 0
    _open_history(job, principal_id)
    external_id = str(job.params.get("external_id", "")) or str(job.params["pseudonym"])
    pseudonym = str(job.params["pseudonym"])
    params: list[Any] = [rules.ERASED, rules.ERASED, external_id, pseudonym, ids]
    with connection.cursor() as cursor:
        # The live table is not append-only; its history is, so that goes through erase_rows.
        cursor.execute(f"UPDATE governance_write {_WRITE_ERASURE} WHERE id = ANY(%s)", params)
    erase_rows(f"UPDATE governance_writeevent {_WRITE_ERASURE} WHERE pgh_obj_id = ANY(%s)", params)
    decisions = _erase_review_material(ids)
    # Nothing is left to review in a write without text, and approving it would bring back an empty fact.
    Write.objects.filter(pk__in=ids, status__in=REVIEWABLE).update(
        status="rejected", decided_at=timezone.now()
    )
    counts = rules.empty_counts()
    counts["writes"] = len(ids)
    counts["review_decisions"] = decisions
    _progress(job, counts, [], {})
    audit.record(
        job.project,
        "principal.erasure_batch",
        ("principal", principal_id),
        reason=str(job.params.get("reason", "")),
        actor=str(job.params.get("actor", "")),
        actor_user=job.created_by,
        data={"job": str(job.pk), "writes": ids, "review_decisions": decisions},
    )
    return len(ids)


def _erase_review_material(write_ids: list[int]) -> int:
    """Reviewers' notes and edits on the person's writes, in the rows and their history."""
    decision_ids = list(
        ReviewDecision.objects.filter(write_id__in=write_ids)
        .filter(~Q(reason=rules.ERASED) | ~Q(edited_statement=""))
        .values_list("pk", flat=True)
    )
    if not decision_ids:
        return 0
    erase_rows(
        "UPDATE governance_reviewdecision SET reason = %s, edited_statement = '' WHERE id = ANY(%s)",
        [rules.ERASED, decision_ids],
    )
    erase_rows(
        "UPDATE governance_reviewdecisionevent SET reason = %s, edited_statement = '' "
        "WHERE pgh_obj_id = ANY(%s)",
        [rules.ERASED, decision_ids],
    )
    return len(decision_ids)


@transaction.atomic
def finish_erasure(job_id: UUID) -> Job:
    """The rest of the person's records, then the receipt: one audit entry the job's result copies."""
    job = _locked_job(job_id)
    if job.is_finished:
        return job
    principal_id = int(job.params["principal"])
    _open_history(job, principal_id)
    # Decisions on writes erased earlier by a withdrawal (their text was already gone).
    decisions = selectors.decisions_to_erase(principal_id).values_list("write_id", flat=True)
    review_decisions = _erase_review_material(list(decisions))
    sessions = Session.objects.select_for_update().filter(principal_id=principal_id).order_by("pk")
    hints = [h for h in sessions.values_list("resume_hint", flat=True) if h]
    seals = _redact_person_retrievals(principal_id, hints)
    resume_hints = sessions.exclude(resume_hint="").update(resume_hint="", resume_hint_held=False)
    blocks, _ = SessionBlock.objects.filter(
        Q(principal_id=principal_id) | Q(session__principal_id=principal_id)
    ).delete()
    _scrub_refs(principal_id, str(job.params.get("external_id", "")), str(job.params["pseudonym"]))
    _scrub_request_paths(str(job.params.get("external_id", "")), str(job.params["pseudonym"]))
    counts = rules.empty_counts()
    counts.update(
        review_decisions=review_decisions,
        session_blocks=blocks,
        resume_hints=resume_hints,
    )
    _progress(job, counts, [], seals)
    result = job.result or {}
    totals = result["counts"]
    # Sealed now: the receipt names the entry's place in the chain and its hash.
    entry = audit.record_sealed(
        job.project,
        rules.RECEIPT_ACTION,
        ("principal", principal_id),
        reason=str(job.params.get("reason", "")),
        actor=str(job.params.get("actor", "")),
        actor_user=job.created_by,
        data={
            "job": str(job.pk),
            "principal": job.params["pseudonym"],
            "requested_at": job.params.get("requested_at"),
            "counts": totals,
            "nothing_new": rules.total_items(totals) == 0,
            "tombstones": sorted(result.get("tombstones", [])),
            "retrieval_seals": dict(
                sorted(result.get("retrieval_seals", {}).items(), key=lambda kv: int(kv[0]))
            ),
        },
    )
    receipt = selectors.recorded_receipt(entry)
    job.result = {"receipt": receipt}
    job.params = {k: v for k, v in job.params.items() if k != "external_id"}
    job.status = JobStatus.SUCCEEDED
    job.finished_at = timezone.now()
    job.progress_total = max(job.progress_total, job.progress_done)
    job.save(update_fields=["result", "params", "status", "finished_at", "progress_total"])
    return job


def _redact_person_retrievals(principal_id: int, hints: list[str]) -> dict[int, str]:
    """Every stored retrieval for the person: the question asked, their section, their resume hint."""
    forms = sorted({form for hint in hints for form in quoted_forms(hint)}, key=len, reverse=True)
    contexts: dict[int, str] = {}
    queries: dict[int, str] = {}
    events = RetrievalEvent.objects.filter(principal_id=principal_id).values_list("pk", "query", "context")
    for pk, query, context in events.iterator(chunk_size=500):
        redacted = rules.redact_lines(rules.redact_person_section(context), forms)
        if redacted != context:
            contexts[pk] = redacted
        if query:
            queries[pk] = ""
    return _store_redacted(contexts, queries)


def _scrub_request_paths(external_id: str, pseudonym: str) -> None:
    """History rows carry the request path they were written under (pghistory context);
    a path such as ``/api/v1/principals/<id>/memories`` names the person."""
    if not external_id:
        return
    # Only the path segment that names a principal: a short id must not rewrite other paths.
    segment, replacement = f"/principals/{external_id}/", f"/principals/{pseudonym}/"
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pghistory_context SET metadata = jsonb_set(metadata, '{url}', "
            "to_jsonb(replace(metadata->>'url', %s, %s))) "
            "WHERE metadata ? 'url' AND strpos(metadata->>'url', %s) > 0",
            [segment, replacement, segment],
        )
