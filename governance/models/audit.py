"""The hash-chained audit trail (R15)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from governance.models.history import append_only
from governance.models.projects import Project

# An UPDATE of an audit entry the append-only trigger lets through: sealing,
# and nothing else. The row was unsealed (no sequence, no hashes), only the
# three sealing columns change, and it comes through the database function
# governance_seal_audit_entries (migration 0038), which alone sets the flag
# that governance_audit_sealing() reads, and runs as the owner role: the
# application role's own UPDATE is refused, even with the flag set.
SEALING = (
    "OLD.sequence IS NULL AND OLD.previous_hash = '' AND OLD.entry_hash = '' "
    "AND NEW.sequence IS NOT NULL "
    "AND (NEW.id, NEW.project_id, NEW.actor, NEW.actor_user_id, NEW.action, NEW.object_type, "
    "NEW.object_id, NEW.reason, NEW.data, NEW.request_id, NEW.created_at) IS NOT DISTINCT FROM "
    "(OLD.id, OLD.project_id, OLD.actor, OLD.actor_user_id, OLD.action, OLD.object_type, "
    "OLD.object_id, OLD.reason, OLD.data, OLD.request_id, OLD.created_at) "
    "AND governance_audit_sealing()"
)


class AuditEntry(models.Model):
    """One state change with actor and reason.

    An entry is appended unsealed (``sequence`` NULL, hashes empty), so writers
    of one project never wait on each other; the sealer (``services.audit.seal``)
    then gives committed entries their place in the project's chain. Once
    sealed, ``entry_hash`` covers this entry's content and the previous entry's
    hash in the same project, so editing or removing any sealed row breaks
    every later link (``manage.py verify_audit``). Erasable content never
    enters ``data``: a withdrawal records the statement's digest, so the chain
    survives erasure.
    """

    # No index of its own: audit_recent_idx starts with the project (migration 0045).
    project = models.ForeignKey(
        Project, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    sequence = models.PositiveBigIntegerField(null=True, blank=True)  # NULL until sealed
    actor = models.CharField(max_length=200)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    data = models.JSONField(default=dict)
    # Our own ids are 32 hex characters; a client's (up to 64) is kept with a
    # "client:" mark, so it is never mistaken for one of ours.
    request_id = models.CharField(max_length=80, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    previous_hash = models.CharField(max_length=64, blank=True, default="")  # "" until sealed
    entry_hash = models.CharField(max_length=64, blank=True, default="")  # "" until sealed

    class Meta:
        ordering = ["project", "sequence"]
        constraints = [
            # One entry per place in a chain; entries without a project form
            # one chain (NULLs equal). Unsealed entries have no place yet.
            models.UniqueConstraint(
                fields=["project", "sequence"],
                condition=models.Q(sequence__isnull=False),
                nulls_distinct=False,
                name="audit_sequence_unique",
            )
        ]
        indexes = [
            # What the sealer looks for: few rows at any time (sealed within seconds).
            models.Index(
                fields=["project", "id"], condition=models.Q(sequence__isnull=True), name="audit_unsealed_idx"
            ),
            models.Index(fields=["object_type", "object_id"], name="audit_object_idx"),
            models.Index(fields=["project", "-created_at"], name="audit_recent_idx"),
            models.Index(fields=["actor"], name="audit_actor_idx"),
        ]
        triggers = append_only("audit", allow_update_when=SEALING)

    def __str__(self) -> str:
        return f"#{self.sequence or '(sealing)'} {self.action} {self.object_type}:{self.object_id}"


class AuditCheckpoint(models.Model):
    """A signed statement of one chain's head: "at ``created_at``, the chain of
    ``project`` ran to entry ``sequence`` whose hash was ``entry_hash``".

    The chain alone cannot show that its tail was cut off, or that someone with
    the database rewrote an entry and recomputed every later hash. A checkpoint
    can, because its HMAC ``signature`` needs ``settings.AUDIT_CHECKPOINT_KEY``,
    which the database never holds, and because copies are exported to a file
    the database cannot reach (``manage.py checkpoint_audit --export``).
    """

    project = models.ForeignKey(Project, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    sequence = models.PositiveBigIntegerField()
    entry_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    # The project's retrieval events up to this id, and how many there were:
    # deleting a sealed event leaves fewer. Ids are handed out before commit,
    # so an event with a lower id may commit after the checkpoint; later counts
    # can only grow from that, which is why verification checks "not fewer".
    retrievals_through = models.PositiveBigIntegerField(default=0)
    retrieval_count = models.PositiveBigIntegerField(default=0)
    signature = models.CharField(max_length=64)

    class Meta:
        ordering = ["project", "sequence", "id"]
        indexes = [models.Index(fields=["project", "-sequence", "-id"], name="audit_checkpoint_head_idx")]
        triggers = append_only("checkpoint")

    def __str__(self) -> str:
        return f"checkpoint of #{self.sequence}"


class ErasureGrant(models.Model):
    """Erasure is open in the transaction ``transaction_id``, as ``audit_entry`` records.

    Written only by the database function ``governance_open_erasure`` (SECURITY
    DEFINER), together with its audit entry; a trigger refuses any other role's
    insert, update or delete, so the application role cannot open erasure by
    itself. The append-only triggers of erasable history let an UPDATE through
    only while a grant for the current transaction exists.
    """

    transaction_id = models.BigIntegerField(db_index=True)
    audit_entry = models.ForeignKey(AuditEntry, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"erasure in transaction {self.transaction_id}"
