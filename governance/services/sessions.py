"""Sessions: opening one (bound to one principal, or to none, for good) and ending it.

``open_session`` is the only door through which a session is created or
used: writes, retrievals and session ends all pass through it, so a session
cannot serve one person's memory to another (R1, R12).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from governance.models import Agent, Fact, Principal, Session, Write
from governance.rules import guard
from governance.rules.provenance import identifier_problem, summary_ref
from governance.rules.sessions import resume_hint_findings
from governance.rules.summaries import SummaryCheck, check_summary
from governance.rules.supersession import effective_caps
from governance.services import audit, statements
from governance.services.facts import end_scope

SUMMARY_CHECK = "summary_check"
# Summaries come from the agent's summarizer (authority 2 at most, R4). Their
# faithfulness is what R17 checks, so a clean check makes them active without
# a person; anything dropped sends them to review.
SUMMARY_AUTO_APPROVE_FLOOR = 1


class SessionError(Exception):
    """The session cannot be used this way (answered as 400 with ``field``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def open_session(
    agent: Agent,
    external_id: str,
    principal: Principal | None,
    *,
    lock: bool = False,
    mode: str = "",
    looked_up: bool = False,
    found: Session | None = None,
    insert_later: bool = False,
) -> Session:
    """The agent's session ``external_id``, created on first use and bound to ``principal`` for good.

    A session is about exactly one person, or about nobody (project memory
    only), from the moment it is created: using it later with another
    principal, or without one once it is bound, is refused. ``lock`` takes the
    session's row lock, for callers that change what hangs off it (slots, the
    cached blocks, its end). ``mode`` is stored on a session this call creates
    (a retrieval's R9 mode, saving the UPDATE its first computation would send).
    ``looked_up``: the caller has read the session by (agent, external id)
    already, locked when ``lock`` asks for it, in a statement of its own
    (a retrieval's header), and ``found`` is what it found (None: nothing);
    the rules below apply to it exactly as to a session this call reads, and
    a missing one is inserted without a second look-up first.
    ``insert_later`` (with ``looked_up``): a missing session is returned
    unsaved, for the caller to insert in a statement it sends anyway
    (``opening_statement``; a retrieval's first round sends it with its
    candidate read) and then ``adopt``; until then the session holds no lock.
    """
    problem = identifier_problem(external_id, "session id")
    if problem:
        raise SessionError("session", problem)
    sessions = Session.objects.select_for_update() if lock else Session.objects
    session = found if looked_up else sessions.filter(agent=agent, external_id=external_id).first()
    created = False
    if session is None:
        session = Session(
            project=agent.project, agent=agent, principal=principal, external_id=external_id, mode=mode
        )
        if insert_later:
            assert looked_up, "only a session the caller looked for and did not find is inserted later"
            return session  # bound to ``principal`` from its INSERT on, as below
        # A row this transaction inserted is locked by it, as ``lock`` asks.
        created = insert_unless_taken(session)
        if not created:
            # Taken by another round between the look-up and the INSERT: use it.
            session = sessions.get(agent=agent, external_id=external_id)
    # The session is this agent's, in its project: later reads need no lookups.
    session.agent = agent
    session.project = agent.project
    wanted = principal.pk if principal is not None else None
    if not created and session.principal_id != wanted:
        if session.principal_id is None:
            message = (
                f"Session '{external_id}' began without a person (project memory only) and stays that "
                "way; start a new session to work with memory about a person."
            )
        elif principal is None:
            message = (
                f"Session '{external_id}' is about a person: name the same principal, or use another "
                "session for project memory only."
            )
        else:
            message = f"Session '{external_id}' is about another person; start a new session for this one."
        raise SessionError("session", message)
    return session


def insert_unless_taken(session: Session) -> bool:
    """INSERT the session unless its (agent, external id) is taken; True when inserted.

    One statement where ``get_or_create`` sends four (a savepoint, the INSERT,
    the release, and on a race the rollback): a retrieval's first round opens
    its session this way (docs/performance.md, "Statements per retrieval"),
    when it does not send the INSERT with its candidate read.
    """
    sql, values = opening_statement(session)
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        row = cursor.fetchone()
    if row is None:
        return False
    adopt(session, row[0])
    return True


def opening_statement(session: Session) -> tuple[str, dict[str, Any]]:
    """The INSERT of the unsaved ``session`` unless its (agent, external id) is taken,
    returning its id (no row when taken), with named values (``OPENING_PREFIX``
    and the column) so that it can join a statement of other named values.

    A row this transaction inserted is locked by it until the transaction
    ends: the lock ``open_session(lock=True)`` takes of a session it finds.
    """
    sql, fields = _opening_sql()
    values = {
        f"{OPENING_PREFIX}{f.column}": f.get_db_prep_save(f.pre_save(session, add=True), connection)
        for f in fields
    }
    return sql, values


OPENING_PREFIX = "opening_"


@functools.cache
def _opening_sql() -> tuple[str, tuple[Any, ...]]:
    """``opening_statement``'s text and the fields it names: the same for every session."""
    meta = Session._meta
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key)
    quote = connection.ops.quote_name
    pk_column = meta.pk.column if meta.pk is not None else "id"
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(str(f.column)) for f in fields)}) "
        f"VALUES ({', '.join(f'%({OPENING_PREFIX}{f.column})s' for f in fields)}) "
        "ON CONFLICT (agent_id, external_id) DO NOTHING "
        f"RETURNING {quote(str(pk_column))}"
    )
    return sql, fields


def adopt(session: Session, pk: int) -> None:
    """Mark the session ``opening_statement`` inserted as the stored row ``pk``."""
    session.pk = pk
    statements.stored(session)


class SessionAlreadyEnded(Exception):
    pass


@dataclass(frozen=True)
class EndRequest:
    principal: str
    summary: str
    resume_hint: str
    first_event: str
    last_event: str
    source_text: str | None = None


@dataclass(frozen=True)
class EndResult:
    session: Session
    write: Write | None
    check: SummaryCheck | None
    slots_ended: int
    # The guard's findings on the resume hint; any means it will not be injected.
    hint_findings: tuple[guard.Finding, ...] = ()


def dropped_finding(check: SummaryCheck, what: str = "summary") -> guard.Finding:
    """What ``what`` (the summary, or the resume hint) left out of the conversation, for a reviewer."""
    # One mention per dropped text: the check reports every occurrence (for the
    # diff), but a reviewer reads "VP of Engineering" once.
    dropped = check.distinct()
    listed = "; ".join(f"{item.category}: \u201c{item.text}\u201d" for item in dropped[:12])
    more = f" (and {len(dropped) - 12} more)" if len(dropped) > 12 else ""
    return guard.Finding(
        check=SUMMARY_CHECK,
        severity="medium",
        detail=f"The {what} leaves out what the conversation said: {listed}{more}.",
    )


def end_session(
    agent: Agent, external_id: str, request: EndRequest, *, now: datetime | None = None
) -> EndResult:
    """``now`` is the scenario harness's clock (docs/quality.md); by default the real time."""
    # Writes pass through open_session too, so this module cannot import them at load time.
    from governance.services.writes import UnknownReference, WriteRequest, submit_write

    for field, value in (("first_event", request.first_event), ("last_event", request.last_event)):
        problem = identifier_problem(value, field.replace("_", " "))
        if problem:
            raise SessionError(field, problem)
    summary = request.summary.strip()
    hint = request.resume_hint.strip()
    # R17's check reads the whole source text: it runs before the transaction
    # and the session's row lock, so a slow check never holds either. The
    # resume hint is checked against the same text: it is injected word for
    # word next session, so a hint that drops a limit or a prohibition is as
    # dangerous as a summary that does.
    check = check_summary(summary, request.source_text) if request.source_text and summary else None
    hint_check = check_summary(hint, request.source_text) if request.source_text and hint else None
    with transaction.atomic():
        principal, _ = Principal.objects.get_or_create(project=agent.project, external_id=request.principal)
        session = open_session(agent, external_id, principal, lock=True)
        if session.ended_at is not None:
            raise SessionAlreadyEnded(
                f"Session '{external_id}' already ended at {session.ended_at.isoformat()}."
            )
        now = now or timezone.now()
        caps = effective_caps(agent.project.source_caps)
        # The hint is injected verbatim next session (R9) but is no fact, so the
        # guard's findings on it ride on the summary's write, where a reviewer
        # sees them; retrieval withholds a hint that has any (R5).
        hint_findings = resume_hint_findings(request.resume_hint, caps)
        if hint_check is not None and hint_check.material:
            hint_findings = (*hint_findings, dropped_finding(hint_check, "resume hint"))
        write = None
        if summary:

            def attach_range(created: Write) -> None:
                if created.fact_id is not None:
                    # The source is kept with the check so the console can show
                    # what was dropped, in place, as a diff (R17).
                    Fact.objects.filter(pk=created.fact_id).update(
                        event_first=request.first_event,
                        event_last=request.last_event,
                        summary_check=check.to_dict() if check else None,
                        summary_source=request.source_text if check else None,
                    )

            # A field the summary's write refuses is the session end's bad input: 400, nothing kept.
            try:
                write = submit_write(
                    agent,
                    WriteRequest(
                        principal=request.principal,
                        kind="summary",
                        key=None,
                        statement=summary,
                        source_type="summarizer",
                        source_ref=summary_ref(
                            external_id, request.first_event, request.last_event, session_pk=session.pk
                        ),
                        source_observed_at=now,
                        session=external_id,
                    ),
                    extra_findings=(
                        *((dropped_finding(check),) if check and check.material else ()),
                        *hint_findings,
                    ),
                    auto_approve_min_authority=SUMMARY_AUTO_APPROVE_FLOOR,
                    after_create=attach_range,
                    # Each session keeps its own summary fact, event range and check.
                    corroborate=False,
                    now=now,
                )
            except UnknownReference as exc:
                raise SessionError(exc.field, str(exc)) from exc
        slots_ended = end_session_scope(
            session, reason=f"Session {external_id} ended", actor_label=f"agent:{agent.slug}"
        )
        session.ended_at = now
        session.resume_hint = hint
        session.summary_fact_id = write.fact_id if write else None
        # With a summary, the hint waits with it (its findings sent the summary
        # to review); without one, a flagged hint is held for good.
        session.resume_hint_held = bool(hint_findings) and write is None
        session.save(update_fields=["ended_at", "resume_hint", "summary_fact", "resume_hint_held"])
        Principal.objects.filter(pk=principal.pk).update(last_seen_at=now)
        audit.record(
            agent.project,
            "session.ended",
            session,
            data={
                "summary_write": write.pk if write else None,
                "slots_ended": slots_ended,
                "dropped": len(check.dropped) if check else None,
                "resume_hint_findings": sorted({f.check for f in hint_findings}),
            },
        )
    return EndResult(
        session=session, write=write, check=check, slots_ended=slots_ended, hint_findings=hint_findings
    )


def end_session_scope(session: Session, *, reason: str, actor_label: str) -> int:
    """R8 end of scope for one session: its slots (in-session working memory) end with it."""
    return end_scope(
        Fact.objects.filter(session=session, kind="slot"), reason=reason, actor_label=actor_label
    )
