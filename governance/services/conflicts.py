"""Possible conflicts: two active facts that may give one attribute two values, put before a person.

When the write path cannot be sure a new statement contradicts an active one
(a hedged reading, or the background similarity check below), it keeps both:
retrieval injects only the newer direct evidence and marks the older one
``conflict_lost`` in the event (R6, R14). The pair is then put in front of a
reviewer as a *conflict review*: a write in the review queue, ``pending_review``,
whose ``fact`` is the newer statement (already active) and whose
``conflicts_with`` is the older one, with a ``possible_conflict`` finding. The
reviewer's three answers go through ``services/reviews.py`` ``decide``:

- approve: the newer replaces the older (a supersession, decided by the reviewer);
- reject: the newer is taken out of memory and the older one is injected again;
- keep both: not a conflict; both are injected from then on.

The agent's own write keeps its answer (``active`` with the finding): the
conflict review is a separate row made by the system, like a dispute
(``services/facts.py`` ``dispute_fact``), so the agent API contract does not move.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pgvector.django import CosineDistance

from governance.models import Fact, Principal, Project, Write
from governance.rules import contradictions
from governance.selectors import retrievals as retrieval_selectors
from governance.services import audit, session_blocks

logger = logging.getLogger(__name__)

POSSIBLE_CONFLICT_CHECK = "possible_conflict"
KEEP_BOTH = "keep_both"
# What a conflict review's source reference says: the system opened it, about this fact.
REVIEW_REF = contradictions.CONFLICT_REVIEW_PREFIX + "fact-{fact}"
# Neighbours compared by the background check: the nearest few are where a
# rewording of the same attribute lives; more only costs time.
NEIGHBOURS = 10


def flag_possible_conflict(newer: Fact, older: Fact, *, detail: str, found_by: str) -> Write | None:
    """Put the pair in front of a reviewer, once; None when it is already there or was decided.

    Runs inside the caller's transaction (the write path's, or the background
    check's). Both facts must be active: a pair that already resolved itself
    needs nobody.
    """
    if newer.status != "active" or older.status != "active" or newer.pk == older.pk:
        return None
    pair = Q(fact=newer, conflicts_with=older) | Q(fact=older, conflicts_with=newer)
    already = Write.objects.filter(pair, source_ref__startswith=contradictions.CONFLICT_REVIEW_PREFIX).filter(
        Q(status="pending_review") | Q(decisions__action=KEEP_BOTH)
    )
    if already.exists():
        return None
    now = timezone.now()
    finding = {
        "check": POSSIBLE_CONFLICT_CHECK,
        "severity": "medium",
        "detail": (
            f"{detail} Both are kept; until you decide, agents are given only the newer one. "
            "Approve if the newer one replaces the older; reject if the newer one is wrong; "
            "keep both if they do not contradict each other."
        ),
    }
    write = Write.objects.create(
        project_id=newer.project_id,
        agent_id=newer.agent_id,
        principal_id=newer.principal_id,
        kind=newer.kind,
        key=newer.key,
        statement=newer.statement,
        fingerprint=newer.fingerprint,
        source_type=newer.source_type,
        source_ref=REVIEW_REF.format(fact=newer.pk),
        source_observed_at=newer.source_observed_at,
        authority=newer.authority,
        findings=[finding],
        risk=2 * 3 + 1,
        outcome="pending_review",
        status="pending_review",
        fact=newer,
        conflicts_with=older,
        created_at=now,
    )
    # The older one may sit in a cached session-start block (R12): from now on it loses.
    session_blocks.invalidate([older.pk, newer.pk])
    audit.record(
        newer.project,
        "fact.possible_conflict",
        newer,
        reason="May give a different value than an older fact; a reviewer decides.",
        actor=f"system:conflict-check:{found_by}",
        data={"write": write.pk, "older_fact": older.pk, "found_by": found_by},
    )
    return write


def rulings_for(project: Project | int, principal: Principal | int | None) -> contradictions.PairRulings:
    """Pairs a reviewer kept both of, and pairs waiting for one (one query).

    A retrieval reads them with its header instead (``retrieval_header``), from the same SQL.
    """
    project_id = project.pk if isinstance(project, Project) else project
    principal_id = principal.pk if isinstance(principal, Principal) else principal
    return retrieval_selectors.conflict_rulings(project_id, principal_id)


def check_similar_facts(fact_id: int) -> list[int]:
    """The background check (Celery, after the fact is stored and embedded): similar facts of the
    same principal that give different values are put in front of a reviewer. The review items made.

    The judgement is rules/contradictions.py ``similar_conflict``; the thresholds and how they were chosen
    are in docs/relevance.md ("Possible conflicts by similarity").
    """
    fact = Fact.objects.filter(
        pk=fact_id, status="active", embedding__isnull=False, kind__in=contradictions.SIMILARITY_KINDS
    ).first()
    if fact is None or not fact.statement:
        return []
    same_principal = (
        Q(principal_id=fact.principal_id) if fact.principal_id is not None else Q(principal__isnull=True)
    )
    neighbours = list(
        Fact.objects.filter(
            same_principal,
            project_id=fact.project_id,
            session=None,
            status="active",
            embedding__isnull=False,
            kind__in=contradictions.SIMILARITY_KINDS,
        )
        .exclude(pk=fact.pk)
        .annotate(distance=CosineDistance("embedding", fact.embedding))
        .filter(distance__lte=1 - contradictions.CONFLICT_MIN_SIMILARITY)
        .order_by("distance", "pk")
        .only("pk", "statement", "key", "source_observed_at", "status")[:NEIGHBOURS]
    )
    made: list[int] = []
    for other in neighbours:
        score = 1 - float(other.distance)
        later = (fact.source_observed_at, fact.pk) > (other.source_observed_at, other.pk)
        newer, older = (fact, other) if later else (other, fact)
        found = contradictions.similar_conflict(
            newer.statement, older.statement, score, new_key=newer.key, old_key=older.key
        )
        if found is None:
            continue
        with transaction.atomic():
            locked = {
                f.pk: f
                for f in Fact.objects.select_for_update()
                .select_related("project")
                .filter(pk__in=[newer.pk, older.pk])
                .order_by("pk")
            }
            if len(locked) != 2:
                continue
            write = flag_possible_conflict(
                locked[newer.pk], locked[older.pk], detail=found.detail(), found_by="similarity"
            )
        if write is not None:
            made.append(write.pk)
            logger.info("Possible conflict between facts %s and %s put up for review.", newer.pk, older.pk)
    return made
