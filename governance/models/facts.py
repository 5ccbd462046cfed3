"""Facts, the supersessions between them, and what remains of withdrawn ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from pgvector.django import VectorField

from governance.models.history import append_only, tracked
from governance.models.projects import Agent, Principal, Project
from governance.models.search import full_text_index, substring_index
from governance.models.sessions import Session


def vector_text(values: Sequence[float]) -> str:
    """pgvector's text form of a vector, each value as the float4 the column keeps.

    Nine significant digits name any float4 exactly, and formatting them takes
    a third of the time of Python's shortest form of the same value as a
    double (pgvector's own ``str(float(v))``, ~0.35 ms for 384 values, paid by
    every write that stores its guard vector and every retrieval's query).
    Rounding to float4 here, once, is what the column does on the way in.
    """
    floats = np.asarray(values, dtype=np.float32).tolist()
    # %-formatting: a third faster here than the f-string form ruff prefers.
    return "[" + ",".join(["%.9g" % v for v in floats]) + "]"  # noqa: UP031


class EmbeddingField(VectorField):
    """pgvector's field, sending a vector given as numbers through ``vector_text``.

    Migrations see pgvector's VectorField: the column and its values are the same.
    """

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return vector_text(value)
        return super().get_prep_value(value)

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "pgvector.django.vector.VectorField", args, kwargs


class FactKind(models.TextChoices):
    PREFERENCE = "preference"
    PROFILE = "profile"
    PROJECT_FACT = "project_fact"
    INCIDENT = "incident"
    TOOL_INSTRUCTION = "tool_instruction"
    EPISODIC = "episodic"
    SUMMARY = "summary"
    SLOT = "slot"


class FactStatus(models.TextChoices):
    ACTIVE = "active"
    PENDING_REVIEW = "pending_review"
    QUARANTINED = "quarantined"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    WITHDRAWN = "withdrawn"
    EXPIRED = "expired"
    OUT_OF_SCOPE = "out_of_scope"


class Confidence(models.TextChoices):
    UNVERIFIED = "unverified"
    CORROBORATED = "corroborated"
    VERIFIED = "verified"
    DISPUTED = "disputed"


class SourceType(models.TextChoices):
    CONFIG = "config"
    DOCUMENTATION = "documentation"
    REVIEWER = "reviewer"
    USER_STATEMENT = "user_statement"
    SUPPORT_TICKET = "support_ticket"
    TOOL_OUTPUT = "tool_output"
    CHAT_MESSAGE = "chat_message"
    MODEL_INFERENCE = "model_inference"
    SUMMARIZER = "summarizer"
    WEB_PAGE = "web_page"


def _in(field: str, choices: type[models.TextChoices]) -> Q:
    return Q(**{f"{field}__in": choices.values})


# summary_source stays out of history: it never changes after the summary is
# written, and withdrawal (R8) then has one copy of it to erase, not many.
# meaning_check_pending stays out of history too: it only says that a background
# task still owes the guard's second look, and clears with the embedding. So do
# claims and lexical_signature, which are worked out from the statement history keeps.
@tracked(
    exclude=["embedding", "summary_source", "meaning_check_pending", "lexical_signature", "claims"],
    erasable=True,
)
class Fact(models.Model):
    # No index of its own: every index of the table that a project's reads use
    # starts with the project (migration 0041).
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="facts", db_index=False)
    # Null for project-level facts, which every principal of the project sees (R1).
    # Its index is fact_principal_changed_idx, which starts with it (migration 0048).
    principal = models.ForeignKey(
        Principal, on_delete=models.PROTECT, null=True, blank=True, related_name="facts", db_index=False
    )
    # Set only for slots: in-session working memory that belongs to one session.
    session = models.ForeignKey(
        Session, on_delete=models.PROTECT, null=True, blank=True, related_name="slots"
    )
    kind = models.CharField(max_length=32, choices=FactKind.choices)
    key = models.CharField(max_length=200, null=True, blank=True)
    # Blank once withdrawn (R8): the tombstone keeps only a keyed hash.
    statement = models.TextField()
    # Provenance (R3): required at write time, never edited afterwards.
    source_type = models.CharField(max_length=32, choices=SourceType.choices)
    source_ref = models.CharField(max_length=500)
    source_observed_at = models.DateTimeField()
    writer = models.CharField(max_length=200, help_text="Who wrote it: agent:<slug> or user:<username>.")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="facts")
    authority = models.PositiveSmallIntegerField()
    confidence = models.CharField(max_length=16, choices=Confidence.choices, default=Confidence.UNVERIFIED)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    last_verified_at = models.DateTimeField()
    status = models.CharField(max_length=32, choices=FactStatus.choices)
    status_reason = models.TextField(blank=True)
    status_changed_at = models.DateTimeField(default=timezone.now)
    embedding = EmbeddingField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedded_at = models.DateTimeField(null=True, blank=True)
    # The write guard's meaning model has not read this statement yet: it was plain
    # (rules/guard_plain.py), so the write was answered on the patterns alone and the
    # model reads it once the embedding task has its vector (R5; services/writes.py,
    # complete_meaning_checks). A database default, so a row inserted by other means
    # (a bulk copy) owes nothing.
    meaning_check_pending = models.BooleanField(default=False, db_default=False)
    token_count = models.PositiveIntegerField(default=0)
    # Sizes, negation and a keyed hash of the numbers of the statement
    # (rules/text.py: lexical_signature): the write path reads only the facts that
    # can be near-duplicates of a new statement. 0 (none, or other rules) is
    # always compared; cleared with the statement on withdrawal (R8).
    lexical_signature = models.BigIntegerField(default=0, db_default=0)
    # Keyed digest of the statement as written (services.facts.statement_digest):
    # the audit chain and history keep this, never the erasable text, and
    # without the key it cannot confirm a guessed statement (R8).
    statement_digest = models.CharField(max_length=64)
    # Keyed hash of the normalised statement: matches re-submissions
    # (fact_principal_fingerprint_idx: equality only, so no pattern-matching twin).
    fingerprint = models.CharField(max_length=64)
    derived_from_retrieval = models.ForeignKey(
        "governance.RetrievalEvent",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        # Checked by a trigger instead: events are partitioned (migration 0034).
        db_constraint=False,
    )
    # Summaries: the range of session events they were made from, and R17's check.
    event_first = models.CharField(max_length=200, blank=True)
    event_last = models.CharField(max_length=200, blank=True)
    summary_check = models.JSONField(null=True, blank=True)
    # What a summary was made from (R17's source_text): the console diffs the
    # check's dropped items against it. Null when none was given or once erased.
    summary_source = models.TextField(null=True, blank=True)
    # What the statement claims (rules.contradictions.stored_claims), read when
    # the statement is stored so that retrieval does not read it again. Null
    # until then (manage.py store_fact_claims fills older rows); a value read
    # from another statement, key or reader version is ignored where it is
    # used. Erased with the statement (R8): it repeats the statement's values.
    claims = models.TextField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-recorded_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(authority__gte=1, authority__lte=5), name="fact_authority_1_5"
            ),
            models.CheckConstraint(
                condition=Q(valid_from__isnull=True)
                | Q(valid_to__isnull=True)
                | Q(valid_from__lt=F("valid_to")),
                name="fact_valid_from_before_valid_to",
            ),
            models.CheckConstraint(condition=_in("status", FactStatus), name="fact_status_known"),
            models.CheckConstraint(condition=_in("kind", FactKind), name="fact_kind_known"),
            models.CheckConstraint(condition=_in("confidence", Confidence), name="fact_confidence_known"),
            models.CheckConstraint(condition=_in("source_type", SourceType), name="fact_source_type_known"),
            models.CheckConstraint(
                condition=Q(kind="slot", session__isnull=False) | (~Q(kind="slot") & Q(session__isnull=True)),
                name="fact_slot_has_session",
            ),
            # At most one active fact per principal and key (R6). Project facts
            # (principal null) and slots (per session) follow the same rule, so
            # nulls must compare equal here.
            models.UniqueConstraint(
                fields=["project", "principal", "session", "key"],
                condition=Q(status="active", key__isnull=False),
                nulls_distinct=False,
                name="fact_one_active_per_key",
            ),
        ]
        indexes = [
            # Also answers R9's "newest verification of the principal's active
            # facts" with one probe (selectors.retrievals.last_interaction).
            models.Index(
                fields=["project", "principal", "status", "last_verified_at"],
                name="fact_principal_verified_idx",
            ),
            models.Index(fields=["project", "principal", "key"], name="fact_principal_key_idx"),
            # A principal's facts newest status change first: a first round's history part
            # (selectors.retrievals) stops after the newest that do not stand. Also the
            # principal's own index (the foreign key's, which it replaced: migration 0048).
            models.Index(
                fields=["principal", "-status_changed_at", "-id"], name="fact_principal_changed_idx"
            ),
            models.Index(fields=["status", "valid_to"], name="fact_status_valid_to_idx"),
            models.Index(fields=["project", "status", "kind"], name="fact_project_status_idx"),
            # A write's look-ups (services.writes._what_the_write_meets), planned once per
            # connection: each reads its rows in the order it keeps them, so its generic plan
            # stops after the newest 200 for a principal of any size (migration 0044).
            # The near-duplicate pool: the newest active facts of one kind.
            models.Index(
                fields=["project", "principal", "kind", "id"],
                condition=Q(status="active"),
                name="fact_active_kind_idx",
            ),
            # The contradiction pool: the newest active observations.
            models.Index(
                fields=["project", "principal", "source_observed_at", "id"],
                condition=Q(status="active"),
                name="fact_active_observed_idx",
            ),
            # Copies of a statement are always looked for within one principal (or the
            # project's own facts): a statement many people share is not read whole.
            models.Index(
                fields=["project", "principal", "fingerprint"], name="fact_principal_fingerprint_idx"
            ),
            # The embedding sweep's look-up (facts owed a vector, oldest first):
            # small, since a fact leaves it seconds after it is written.
            models.Index(fields=["id"], condition=Q(embedded_at__isnull=True), name="fact_unembedded_idx"),
            # The sweep's look-up of facts still owed the guard's second look (as small).
            models.Index(
                fields=["id"], condition=Q(meaning_check_pending=True), name="fact_meaning_pending_idx"
            ),
            # The console search (models/search.py).
            full_text_index("statement", "fact_statement_fts"),
            substring_index("statement", "fact_statement_trgm"),
        ]

    def __str__(self) -> str:
        return f"fact {self.pk} ({self.kind}, {self.status})"

    @property
    def is_embedded(self) -> bool:
        return self.embedded_at is not None

    @property
    def is_project_fact(self) -> bool:
        return self.principal_id is None


@tracked()
class Supersession(models.Model):
    """old -> new, with why and who decided (R6, R7)."""

    old_fact = models.ForeignKey(Fact, on_delete=models.PROTECT, related_name="superseded_by")
    new_fact = models.ForeignKey(Fact, on_delete=models.PROTECT, related_name="supersedes")
    reason = models.TextField()
    decided_by = models.CharField(max_length=200, help_text="rule:R6, rule:R7 or user:<username>.")
    write = models.ForeignKey(
        "governance.Write", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["old_fact", "new_fact"], name="supersession_unique"),
            models.CheckConstraint(condition=~Q(old_fact=F("new_fact")), name="supersession_not_self"),
        ]
        triggers = append_only("supersession")

    def __str__(self) -> str:
        return f"{self.old_fact_id} -> {self.new_fact_id}"


class Tombstone(models.Model):
    """What remains of a withdrawn fact: enough to block re-learning it (R8)."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="tombstones")
    fact = models.OneToOneField(Fact, on_delete=models.PROTECT, related_name="tombstone")
    reason = models.TextField()
    actor = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64)
    # Keyed hashes (HMAC with the tombstone key) of the statement's identifying
    # values, so a rewording that carries them is caught too (R8); never the
    # text or an embedding. See governance/rules/identifiers.py.
    value_digests = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["project", "fingerprint"], name="tombstone_fingerprint_idx"),
            GinIndex(fields=["value_digests"], name="tombstone_value_digests_idx"),
        ]
        triggers = append_only("tombstone")

    def __str__(self) -> str:
        return f"tombstone {self.pk} of fact {self.fact_id}"


class ProjectFactsGeneration(models.Model):
    """A number that changes whenever any of a project's principal-less facts changes.

    Retrieval keeps a project's facts in process memory under this number
    (selectors/retrievals.py) and reads it on every retrieval in a statement it
    makes anyway. A database trigger on the fact table (migration 0039) sets it
    from a sequence in the transaction of the change itself, so no service can
    forget it and a rolled-back change never leaves a number that recurs.
    A project none of whose facts changed since the trigger came has no row:
    its number is 0.
    """

    project = models.OneToOneField(Project, on_delete=models.CASCADE, primary_key=True, related_name="+")
    generation = models.BigIntegerField()

    def __str__(self) -> str:
        return f"project {self.project_id} facts generation {self.generation}"
