"""Retrieval events, each with its candidates in the same row: append-only (R14, R15)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from psycopg.types.json import Jsonb

from governance.models.facts import Fact
from governance.models.history import append_only
from governance.models.policies import PolicyVersion
from governance.models.projects import Agent, Principal, Project
from governance.models.search import full_text_index, substring_index
from governance.models.sessions import Session
from governance.rules.retrieval import MODES, REASONS
from governance.rules.seals import EncodedCandidates


def events_naming(fact_id: int, *, selected: bool = False) -> RawSQL:
    """The ids of the events that had ``fact_id`` among their candidates (or injected it).

    For ``pk__in=``: a SECURITY DEFINER function (migration 0036) reads the GIN
    index, which the application role cannot use under row-level security, and
    applies the same project check as the policy; the caller's query on the
    events themselves is still bound by it.
    """
    function = "governance_events_with_selected" if selected else "governance_events_with_candidate"
    return RawSQL(f"SELECT {function}(%s)", [fact_id])


# The order of a candidate's scores in its stored form.
SCORE_KEYS = ("relevance", "freshness", "confidence", "total")


@dataclass
class CandidateRecord:
    """One candidate of a retrieval event as the event recorded it (R14).

    Stored compactly inside the event (``RetrievalEvent.candidate_data``), one
    JSON array per candidate: ``[fact_id, reason, rank, tier, age_days,
    per_round, tokens, *scores]`` with the scores in ``SCORE_KEYS`` order. A
    candidate without a reason was selected. ``fact`` is attached by selectors
    that show the fact beside it.
    """

    event_id: int
    fact_id: int
    reason: str | None
    rank: int | None
    tier: str | None
    age_days: int
    per_round: bool
    tokens: int
    scores: dict[str, float]
    fact: Fact | None = None

    @property
    def decision(self) -> str:
        return "selected" if self.reason is None else "excluded"


class SixPlaces(dict[float, float]):
    """A score as stored: to six places, each distinct value rounded once.

    One is kept for the candidates of one event: their freshness depends on
    the age alone and their confidence on the authority and confidence state,
    so a large principal's round repeats a few values hundreds of times.
    Equal numbers round alike (``-0.0`` and ``0.0`` both store ``0.0``), so
    looking one up by value gives what rounding it again would.
    """

    def __missing__(self, value: float) -> float:
        # + 0.0 turns -0.0 into 0.0, which reads back from jsonb the same (the seal covers these).
        rounded = self[value] = round(float(value), 6) + 0.0
        return rounded


def encode_candidate(
    fact_id: int,
    decision: str,
    reason: str | None,
    rank: int | None,
    tier: str | None,
    age_days: int,
    per_round: bool,
    tokens: int,
    scores: dict[str, float],
    *,
    six_places: SixPlaces | None = None,
) -> list[Any]:
    """The stored form of one candidate (CandidateRecord's docstring); scores to six places.

    What the old table's check constraint held, held here: a selected candidate
    has no reason, an excluded one has one from R14's vocabulary. The
    candidates of one event share one ``six_places``.
    """
    if not ((decision == "selected" and reason is None) or (decision == "excluded" and reason in REASONS)):
        raise ValueError(f"A candidate {decision!r} with reason {reason!r} cannot be recorded.")
    get = scores.get
    rounded = SixPlaces() if six_places is None else six_places
    # Written out for SCORE_KEYS (checked below): a large principal's round encodes thousands.
    return [
        fact_id,
        reason,
        rank,
        tier,
        age_days,
        1 if per_round else 0,
        tokens,
        rounded[get("relevance", 0.0)],
        rounded[get("freshness", 0.0)],
        rounded[get("confidence", 0.0)],
        rounded[get("total", 0.0)],
    ]


assert SCORE_KEYS == ("relevance", "freshness", "confidence", "total"), "encode_candidate writes them out"


def decode_candidates(event_id: int, data: Sequence[Sequence[Any]]) -> list[CandidateRecord]:
    """The event's candidates in their stored order (the order the rules decided them)."""
    return [
        CandidateRecord(
            event_id=event_id,
            fact_id=int(row[0]),
            reason=row[1],
            rank=row[2],
            tier=row[3],
            age_days=int(row[4]),
            per_round=bool(row[5]),
            tokens=int(row[6]),
            scores=dict(zip(SCORE_KEYS, (float(v) for v in row[7:]), strict=False)),
        )
        for row in data
    ]


class CandidateDataField(models.JSONField):
    """An event's candidates: sends the text an ``EncodedCandidates`` already holds.

    The event's seal encoded them (thousands for a large principal); the
    database reads the same JSON. Anything else is encoded as JSONField does.
    Migrations see a plain JSONField: the column and its values are the same.
    """

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, EncodedCandidates):
            return Jsonb(value, dumps=lambda _: value.json)
        return super().get_db_prep_value(value, connection, prepared)

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class FactIdsField(ArrayField):
    """bigint[] of fact ids: a list of ints is sent as the array's text, made in one step.

    ArrayField converts each element through its base field (~4 microseconds
    each: ~10 ms for the ~2,500 candidates of a large principal's first round),
    and psycopg then dumps the list element by element. An INSERT's placeholder
    for the column casts to its type (``%s::bigint[]``), so the text ``{1,2,3}``
    stores the same array. Migrations see a plain ArrayField.
    """

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if type(value) is list and all(type(v) is int for v in value):
            return "{" + ",".join(map(str, value)) + "}"
        return super().get_db_prep_value(value, connection, prepared)

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.contrib.postgres.fields.ArrayField", args, kwargs


class RetrievalEvent(models.Model):
    """What one retrieval gave an agent, and why (R14).

    How the stored text joins the tamper-evident trail. The text is erasable,
    so it stays out of the hash chain; instead each row carries
    ``context_seal``, an HMAC (key outside the database) of its query and
    context, computed before the INSERT: the hot path gains no query and no
    lock. Edited text no longer matches its seal. Deleted rows are caught by
    the signed checkpoints, which record how many events each project had up
    to an id (``AuditCheckpoint.retrievals_through``). A withdrawal's redaction
    is the one legitimate edit: it re-seals the rows it redacts and lists
    their new seals in its own ``fact.withdrawn`` audit entry, so
    ``verify_audit`` accepts them and the trail says who redacted what and why.
    Serialising retrievals on the chain's advisory lock (one audit entry each)
    would have been the alternative; it would make every retrieval of a
    project wait for every other.
    """

    # No index of their own: the log's indexes below start with each (migration 0042).
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="retrievals", db_index=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="retrievals", db_index=False)
    principal = models.ForeignKey(
        Principal, on_delete=models.PROTECT, null=True, blank=True, related_name="retrievals", db_index=False
    )
    session = models.ForeignKey(
        Session, on_delete=models.PROTECT, null=True, blank=True, related_name="retrievals"
    )
    policy_version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="retrievals")
    round = models.PositiveIntegerField(default=1)
    query = models.TextField(blank=True)
    mode = models.CharField(max_length=16)
    identity_verified = models.BooleanField(default=False)
    # The exact text returned; withdrawal redacts erased statements from it (R8).
    context = models.TextField()
    tokens_used = models.PositiveIntegerField()
    token_budget = models.PositiveIntegerField()
    candidate_count = models.PositiveIntegerField()
    excluded_count = models.PositiveIntegerField()
    # Distinct exclusion reasons, for the log's filter without a join.
    reasons = models.JSONField(default=list)
    timings = models.JSONField(default=dict)
    static_block_cached = models.BooleanField(default=False)
    # Why a later round computed its session-start block instead of reusing
    # the cached one (R12 gives way to R1, R2 and R13); blank otherwise.
    cache_note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Keyed digest of query and context (governance.rules.seals), written with
    # the row and rewritten only by a withdrawal's redaction. See the class docstring.
    context_seal = models.CharField(max_length=64, blank=True)
    # Every candidate with its decision, reason, scores and tokens, in one compact
    # JSON document written with the event (CandidateRecord says its form), and
    # the candidates' and the injected facts' ids as arrays for "which
    # retrievals saw / injected this fact" through GIN indexes.
    candidate_data = CandidateDataField(default=list)
    candidate_fact_ids = FactIdsField(models.BigIntegerField(), default=list)
    selected_fact_ids = FactIdsField(models.BigIntegerField(), default=list)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=Q(mode__in=MODES), name="retrieval_mode_known")]
        indexes = [
            # Keyset pagination of the log, overall and per agent / principal.
            models.Index(fields=["project", "-created_at", "-id"], name="retrieval_log_idx"),
            models.Index(fields=["agent", "-created_at", "-id"], name="retrieval_agent_log_idx"),
            models.Index(fields=["principal", "-created_at", "-id"], name="retrieval_principal_log_idx"),
            # The log's exclusion-reason filter: a rare reason would otherwise walk most of the
            # log index (bench/retrieval_log.py: 220 ms at 1 M events, well under 1 ms with this).
            GinIndex(fields=["reasons"], opclasses=["jsonb_path_ops"], name="retrieval_reasons_gin"),
            # The console search over what agents asked (models/search.py).
            full_text_index("query", "retrieval_query_fts"),
            substring_index("query", "retrieval_query_trgm"),
            GinIndex(fields=["candidate_fact_ids"], name="retrieval_candidate_facts_gin"),
            GinIndex(fields=["selected_fact_ids"], name="retrieval_selected_facts_gin"),
        ]
        triggers = append_only("retrieval", allow_erasure=True)

    def __str__(self) -> str:
        return f"retrieval {self.pk}"

    @property
    def candidates(self) -> list[CandidateRecord]:
        """The candidates in the order the rules decided them."""
        return decode_candidates(self.pk, self.candidate_data)

    def ranked_candidates(self) -> list[CandidateRecord]:
        """Selected candidates in rank order first, then the rest in the order they were decided."""
        return sorted(self.candidates, key=lambda c: (c.rank is None, c.rank or 0))


class RetrievalFeedback(models.Model):
    """What the agent says it did with a retrieval: the items it used, and any it found wrong.

    One per retrieval, written by the agent that retrieved. ``stale_used`` is
    judged when the feedback arrives: the used items that had by then been
    superseded, withdrawn or had expired, which is stale adoption on live
    traffic (docs/quality.md). Append-only like the event it describes.
    """

    # No database foreign key: a partitioned table's key is (id, created_at), so
    # a trigger checks the event exists instead (migration 0034).
    event = models.OneToOneField(
        RetrievalEvent, on_delete=models.PROTECT, related_name="feedback", db_constraint=False
    )
    used = models.JSONField(default=list)
    wrong = models.JSONField(default=list)
    stale_used = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        triggers = append_only("feedback")

    def __str__(self) -> str:
        return f"feedback on retrieval {self.event_id}"
