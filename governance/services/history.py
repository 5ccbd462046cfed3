"""The one door through which erasure changes rows of append-only tables.

History rows (django-pghistory), review decisions and retrieval events refuse
UPDATE (R15); erasure (R8) is the one exception. The append-only triggers let
such an UPDATE through only in a transaction for which the database function
``governance_open_erasure`` (SECURITY DEFINER, owned by the owner role) has
recorded a grant, and that function writes the grant's audit entry itself, in
the same transaction. The application role cannot write grants any other way
(migration 0024_a_database_guards), so every erasure leaves an entry in the
hash-chained trail saying who opened it, on what, and why.

``open_erasure`` opens it for the rest of a transaction; ``erase_rows`` runs
one erasing statement (withdrawal and forgetting a person both use them);
``erase_everywhere`` blanks one withdrawn statement in every row that copied
it, history included, and re-seals the retrieval text it redacts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Q

from governance.models import AuditEntry, Fact, Project, RetrievalEvent, Write
from governance.models.retrievals import events_naming
from governance.rules import guard, supersession
from governance.rules.rendering import memory_text, single_line
from governance.services import audit, checkpoints


def erase_rows(statement: str, params: Sequence[Any] = ()) -> int:
    """Run one UPDATE that blanks erasable content in append-only rows; how many rows changed.

    ``statement`` is the service's own SQL (table and column names are
    constants, never input); values travel in ``params``. Inside the caller's
    transaction only: the exception must end with the erasure it belongs to.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("History is erased inside the transaction of the erasure it belongs to.")
    if not statement.lstrip().upper().startswith("UPDATE "):
        raise ValueError("Only UPDATE statements erase history; rows are never deleted.")
    # The database refuses it unless open_erasure opened this transaction.
    with connection.cursor() as cursor:
        cursor.execute(statement, list(params))
        changed: int = cursor.rowcount
    return max(changed, 0)


ACTION = "erasure.opened"


def open_erasure(
    project: Project | None,
    subject: models.Model | tuple[str, Any],
    *,
    reason: str,
    data: dict[str, Any] | None = None,
    actor: str | None = None,
    actor_user: Any = None,
) -> AuditEntry:
    """Allow erasing UPDATEs of history for the rest of the current transaction; its audit entry.

    Call it inside the transaction that erases, before the first UPDATE of a
    history row; ``subject`` is what is being erased (a fact, or a principal),
    ``reason`` why. Callers erase only what their reason covers: the grant
    opens history tables for the whole transaction, which is why it is recorded.
    """
    if not reason.strip():
        raise ValueError("Erasure needs a reason.")
    # Built here like any entry and saved by the database function, unsealed:
    # the sealer gives it its place in the chain and its hash, and verify_audit
    # checks it like any other entry.
    entry = audit.next_entry(
        project, ACTION, subject, reason=reason, data=data, actor=actor, actor_user=actor_user
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT governance_open_erasure(%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s)",
            [
                entry.project_id,
                entry.actor,
                entry.actor_user_id,
                entry.object_type,
                entry.object_id,
                entry.reason,
                json.dumps(entry.data),
                entry.request_id,
                entry.created_at,
            ],
        )
        (entry.pk,) = cursor.fetchone()
    # The row exists now; treat the instance as loaded, not as one to insert.
    entry._state.adding = False
    audit.seal_after_commit(entry.project_id)
    return entry


# --- Erasing one statement everywhere it was copied (withdrawal, R8) ---------

ERASED = "[withdrawn]"


@dataclass(frozen=True)
class Erased:
    own_writes: list[int]
    quoting_writes: list[int]
    retrievals: dict[int, str]  # redacted retrieval event id -> its new seal


def quoted_forms(statement: str) -> list[str]:
    """Every form in which other rows may carry the statement, longest first.

    Rendering collapses line breaks and neutralises tag look-alikes (R10);
    the guard's findings collapse whitespace and cut quotes short; conflict
    findings quote through ``supersession.quote``.
    """
    if not statement:
        return []
    collapsed = " ".join(statement.split())
    forms = {statement, single_line(statement), memory_text(statement), collapsed}
    for limit in (guard.DETAIL_QUOTE_CHARS - 3, supersession.QUOTE_LIMIT - 3):
        if len(collapsed) > limit + 3:
            forms.add(collapsed[:limit])
        if len(statement) > limit + 3:
            forms.add(statement[:limit])
    return sorted((f for f in forms if f), key=len, reverse=True)


QUOTED = "[the statement]"


def without_quotes(text: str, statements: list[str]) -> str:
    """``text`` (a person's note) with every quoted form of ``statements`` replaced, for
    records that are never erased."""
    forms = sorted({q for s in statements for q in quoted_forms(s)}, key=len, reverse=True)
    value = text
    for form in forms:
        value = value.replace(form, QUOTED)
    return value


def scrub(value: Any, forms: list[str]) -> Any:
    """``value`` (text or JSON) with every quoted form replaced by the erasure marker."""
    if isinstance(value, str):
        for form in forms:
            value = value.replace(form, ERASED)
        return value
    if isinstance(value, list):
        return [scrub(item, forms) for item in value]
    if isinstance(value, dict):
        return {key: scrub(item, forms) for key, item in value.items()}
    return value


def _erased_findings(findings: Any) -> list[dict[str, Any]]:
    """The check names and severities stay (they are not content); every detail quotes the statement."""
    return [{**f, "detail": ERASED} for f in findings or [] if isinstance(f, dict)]


def _erased_response(response: Any) -> dict[str, Any] | None:
    """The stored 201 body stays replayable for its Idempotency-Key; only its findings quote content."""
    if not isinstance(response, dict):
        return None
    return {**response, "findings": _erased_findings(response.get("findings"))}


def erase_everywhere(fact: Fact, statement: str, *, keep: list[int], extra: list[int]) -> Erased:
    """Blank the statement in every row that copied it, history included.

    ``extra``: other writes that asserted it (the caller matched them by keyed
    fingerprint); ``keep``: writes left intact as evidence for a reviewer.
    """
    forms = quoted_forms(statement)
    # The writes that proposed it or repeated it, and the other assertions of it.
    own = sorted(
        (
            set(Write.objects.filter(Q(fact=fact) | Q(corroborated=fact)).values_list("pk", flat=True))
            | set(extra)
        )
        - set(keep)
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE governance_factevent SET statement = '', summary_check = NULL WHERE pgh_obj_id = %s",
            [fact.pk],
        )
        _scrub_rows(
            cursor,
            "governance_factevent",
            "pgh_id",
            "pgh_obj_id = %s",
            [fact.pk],
            forms,
            text=("status_reason",),
        )
        if own:
            for write in Write.objects.filter(pk__in=own).only("pk", "findings", "response"):
                Write.objects.filter(pk=write.pk).update(
                    statement="",
                    findings=_erased_findings(write.findings),
                    response=_erased_response(write.response),
                )
            cursor.execute(
                "SELECT pgh_id, findings, response FROM governance_writeevent WHERE pgh_obj_id = ANY(%s)",
                [own],
            )
            for pgh_id, findings, response in cursor.fetchall():
                erased_response = _erased_response(_load_json(response))
                cursor.execute(
                    "UPDATE governance_writeevent SET statement = '', findings = %s::jsonb, "
                    "response = %s::jsonb WHERE pgh_id = %s",
                    [
                        json.dumps(_erased_findings(_load_json(findings))),
                        None if erased_response is None else json.dumps(erased_response),
                        pgh_id,
                    ],
                )
            decisions = "write_id = ANY(%s)"
            cursor.execute(
                f"UPDATE governance_reviewdecision SET edited_statement = '' "
                f"WHERE {decisions} AND edited_statement <> ''",
                [own],
            )
            _scrub_rows(cursor, "governance_reviewdecision", "id", decisions, [own], forms, text=("reason",))
            events = "pgh_obj_id IN (SELECT id FROM governance_reviewdecision WHERE write_id = ANY(%s))"
            cursor.execute(
                f"UPDATE governance_reviewdecisionevent SET edited_statement = '' "
                f"WHERE {events} AND edited_statement <> ''",
                [own],
            )
            _scrub_rows(
                cursor, "governance_reviewdecisionevent", "pgh_id", events, [own], forms, text=("reason",)
            )
        quoting = _scrub_quoting_writes(cursor, fact, [*own, *keep], forms)
        retrievals = _redact_retrievals(cursor, fact, forms)
    return Erased(own_writes=own, quoting_writes=quoting, retrievals=retrievals)


def _load_json(value: Any) -> Any:
    # Django's PostgreSQL backend hands raw cursors jsonb as text.
    return json.loads(value) if isinstance(value, str | bytes) else value


def _scrub_rows(
    cursor: Any,
    table: str,
    pk: str,
    where: str,
    params: list[Any],
    forms: list[str],
    *,
    text: tuple[str, ...] = (),
    jsonb: tuple[str, ...] = (),
) -> list[Any]:
    """Replace quoted forms in the ``text`` and ``jsonb`` columns of matching rows; the ids changed."""
    if not forms:
        return []
    columns = [*text, *jsonb]
    # Table and column names are this module's constants, never input.
    cursor.execute(f"SELECT {pk}, {', '.join(columns)} FROM {table} WHERE {where}", params)
    changed = []
    for row_id, *raw in cursor.fetchall():
        values = [_load_json(v) if name in jsonb else v for name, v in zip(columns, raw, strict=True)]
        scrubbed = [scrub(value, forms) for value in values]
        if scrubbed == values:
            continue
        assignments = ", ".join(
            f"{name} = %s::jsonb" if name in jsonb else f"{name} = %s" for name in columns
        )
        cursor.execute(
            f"UPDATE {table} SET {assignments} WHERE {pk} = %s",
            [
                *(
                    json.dumps(v) if name in jsonb and v is not None else v
                    for name, v in zip(columns, scrubbed, strict=True)
                ),
                row_id,
            ],
        )
        changed.append(row_id)
    return changed


def _scrub_quoting_writes(cursor: Any, fact: Fact, own: list[int], forms: list[str]) -> list[int]:
    """Other writes whose findings quote the statement (a conflict, a contradicted verified fact)."""
    nearby = (
        Write.objects.filter(project=fact.project_id)
        .filter(Q(conflicts_with=fact) | Q(principal=fact.principal_id))
        .exclude(pk__in=own)
        .values_list("pk", flat=True)
    )
    ids = list(nearby)
    if not ids:
        return []
    changed = _scrub_rows(
        cursor, "governance_write", "id", "id = ANY(%s)", [ids], forms, jsonb=("findings", "response")
    )
    if changed:
        _scrub_rows(
            cursor,
            "governance_writeevent",
            "pgh_id",
            "pgh_obj_id = ANY(%s)",
            [changed],
            forms,
            jsonb=("findings", "response"),
        )
    return [int(i) for i in changed]


def _redact_retrievals(cursor: Any, fact: Fact, forms: list[str]) -> dict[int, str]:
    """Retrieval text that injected the statement, including later rounds of the same
    sessions, which re-served the cached block without selecting the fact again (R12)."""
    selected = RetrievalEvent.objects.filter(pk__in=events_naming(fact.pk, selected=True))
    sessions = selected.filter(session__isnull=False).values("session_id")
    events = RetrievalEvent.objects.filter(Q(pk__in=selected.values("pk")) | Q(session_id__in=sessions))
    ids = list(events.values_list("pk", flat=True))
    if not ids:
        return {}
    changed = [
        int(i)
        for i in _scrub_rows(
            cursor, "governance_retrievalevent", "id", "id = ANY(%s)", [ids], forms, text=("context", "query")
        )
    ]
    return _reseal_retrievals(cursor, changed)


def _reseal_retrievals(cursor: Any, ids: list[int]) -> dict[int, str]:
    """New seals for redacted retrieval text: the one legitimate edit of it. The caller
    lists them in its audit entry, so the trail records who changed which event and why."""
    if not ids:
        return {}
    cursor.execute(
        "SELECT id, project_id, agent_id, created_at, query, context, candidate_data "
        "FROM governance_retrievalevent "
        "WHERE id = ANY(%s) ORDER BY id",
        [ids],
    )
    seals = {
        row_id: checkpoints.seal_retrieval(project, agent, created_at, query, context, _load_json(candidates))
        for row_id, project, agent, created_at, query, context, candidates in cursor.fetchall()
    }
    cursor.execute(
        "UPDATE governance_retrievalevent AS t SET context_seal = v.seal "
        "FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS seal) AS v WHERE t.id = v.id",
        [list(seals), list(seals.values())],
    )
    return seals
