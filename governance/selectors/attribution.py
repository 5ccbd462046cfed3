"""What the database knows about a memory someone expected an agent to have ("why didn't it know?")."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from governance.models import (
    Agent,
    Fact,
    Principal,
    Project,
    RetrievalEvent,
    RetrievalFeedback,
    Tombstone,
    Write,
)
from governance.rules import attribution as rules
from governance.rules.text import statement_fingerprint
from governance.selectors.retrievals import fact_candidate_history

MAX_MATCHES = 10


@dataclass(frozen=True)
class Answer:
    principal: str
    phrase: str
    attributions: tuple[rules.Attribution, ...]
    statements: dict[int, str]

    @property
    def items(self) -> list[tuple[rules.Attribution, str | None]]:
        """Each attribution with the statement of its fact, when it has one."""
        return [(a, self.statements.get(a.fact_id) if a.fact_id else None) for a in self.attributions]


def why_missing(project: Project, principal_id: str, phrase: str, *, agent: Agent | None = None) -> Answer:
    """Every fact about the person whose statement contains ``phrase`` (newest first), each attributed;
    without one, the writes and withdrawals that explain its absence."""
    principal = Principal.objects.filter(project=project, external_id=principal_id).first()
    if principal is None:
        never = rules.Attribution(
            "never_stored", "Nothing was ever stored about this person in this project."
        )
        return Answer(principal_id, phrase, (never,), {})
    facts = list(
        Fact.objects.filter(project=project, principal=principal, statement__icontains=phrase)
        .exclude(kind="slot")
        .order_by("-recorded_at", "-id")
        .only("id", "status", "status_reason", "statement", "kind")[:MAX_MATCHES]
    )
    if not facts:
        writes = [
            rules.WriteTrace(
                write_id=w.pk,
                status=w.status,
                decision=getattr(getattr(w, "decision", None), "reason", "") or "",
                has_fact=w.fact_id is not None,
            )
            for w in Write.objects.filter(project=project, principal=principal, statement__icontains=phrase)
            .prefetch_related("decisions")
            .order_by("-created_at")[:MAX_MATCHES]
        ]
        # A withdrawn statement is erased; only an exact repeat of it matches its keyed hash (R8).
        fingerprint = statement_fingerprint(phrase, settings.TOMBSTONE_KEY.encode())
        tombstoned = Tombstone.objects.filter(
            project=project, fact__principal=principal, fingerprint=fingerprint
        ).exists()
        return Answer(principal_id, phrase, (rules.attribute_writes(writes, tombstoned=tombstoned),), {})
    history = fact_candidate_history([f.pk for f in facts])
    event_ids = {row[0] for rows in history.values() for row in rows}
    feedback = {fb.event_id: set(fb.used) for fb in RetrievalFeedback.objects.filter(event_id__in=event_ids)}
    retrievals = RetrievalEvent.objects.filter(project=project, principal=principal).count()
    policy = agent.active_policy.policy if agent is not None and agent.active_policy is not None else None
    attributions = []
    for fact in facts:
        candidates = [
            rules.CandidateTrace(
                event_id=event_id,
                created_at=created_at,
                decision=decision,
                reason=reason,
                used=(fact.pk in feedback[event_id]) if event_id in feedback else None,
            )
            for event_id, created_at, decision, reason in history[fact.pk]
        ]
        trace = rules.FactTrace(
            fact.pk, fact.status, fact.status_reason, fact.statement, fact.kind, candidates
        )
        attributions.append(
            rules.attribute_fact(
                trace,
                retrievals_for_person=retrievals,
                kind_allowed=policy is None or fact.kind in policy.allowed_kinds,
            )
        )
    return Answer(principal_id, phrase, tuple(attributions), {f.pk: f.statement for f in facts})
