"""Signed checkpoints of the audit chains' heads, and checking a chain against them.

The hash chain shows that no entry was edited or removed *between* others, but
not that the newest entries were cut off, and someone who can write to the
database can rewrite an entry and recompute every hash after it. A checkpoint
closes both gaps: it records, at a point in time, the sequence and hash of a
chain's head, signed with ``settings.AUDIT_CHECKPOINT_KEY`` (HMAC-SHA256). The
key lives in the application's environment, never in the database, so nobody
with only database access can sign a checkpoint for a rewritten chain.

Checkpoints live in their own append-only table and, for the case where the
whole database is in someone else's hands (checkpoints deleted too), are
appended as JSON lines to a file outside it (``checkpoint_audit --export`` and
``settings.AUDIT_CHECKPOINT_FILE``). ``verify_audit`` then checks that every
chain still reaches the checkpointed entry, with the checkpointed hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q

from governance.models import AuditCheckpoint, AuditEntry, Project, RetrievalEvent
from governance.rules.audit import BrokenLink
from governance.rules.seals import retrieval_seal
from governance.services import audit, feed
from governance.services.retention import EXPIRED


def _chain(project_id: int | None) -> Q:
    """One chain's rows: entries without a project form a chain of their own."""
    return Q(project__isnull=True) if project_id is None else Q(project_id=project_id)


class CheckpointFileError(ValueError):
    """The exported checkpoint file cannot be read as checkpoints."""


def _timestamp(moment: datetime) -> str:
    # Fixed form (UTC, microseconds always shown), so the signed text is the
    # same whether the time comes back from the database or from a file.
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _key() -> bytes:
    return str(settings.AUDIT_CHECKPOINT_KEY).encode()


def sign(
    project_id: int | None,
    sequence: int,
    entry_hash: str,
    created_at: datetime,
    retrievals_through: int,
    retrieval_count: int,
) -> str:
    content = {
        "project": project_id,
        "sequence": sequence,
        "entry_hash": entry_hash,
        "created_at": _timestamp(created_at),
        "retrievals_through": retrievals_through,
        "retrieval_count": retrieval_count,
    }
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hmac.new(_key(), canonical.encode(), hashlib.sha256).hexdigest()


def seal_retrieval(
    project_id: int, agent_id: int, created_at: datetime, query: str, context: str, candidates: Sequence[Any]
) -> str:
    """The seal of a retrieval event's text and candidates (governance.rules.seals), keyed."""
    return retrieval_seal(
        _key(),
        project_id=project_id,
        agent_id=agent_id,
        created_at=created_at,
        query=query,
        context=context,
        candidates=candidates,
    )


@dataclass(frozen=True)
class SignedHead:
    """A checkpoint as read back, from the database or from an exported file."""

    project_id: int | None
    sequence: int
    entry_hash: str
    created_at: datetime
    retrievals_through: int
    retrieval_count: int
    signature: str
    where: str  # for people: "checkpoint 12 in the database", "line 3 of checkpoints.jsonl"

    @classmethod
    def of(cls, checkpoint: AuditCheckpoint) -> SignedHead:
        return cls(
            checkpoint.project_id,
            checkpoint.sequence,
            checkpoint.entry_hash,
            checkpoint.created_at,
            checkpoint.retrievals_through,
            checkpoint.retrieval_count,
            checkpoint.signature,
            f"checkpoint {checkpoint.pk} in the database",
        )

    @property
    def signed_correctly(self) -> bool:
        expected = sign(
            self.project_id,
            self.sequence,
            self.entry_hash,
            self.created_at,
            self.retrievals_through,
            self.retrieval_count,
        )
        return hmac.compare_digest(expected, self.signature)

    @property
    def when(self) -> str:
        return self.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_checkpoints() -> list[AuditCheckpoint]:
    """Seal what waits, then sign the head of every chain that moved since its last checkpoint;
    the new checkpoints."""
    audit.seal_all()
    with transaction.atomic():
        # Sealed entries of one chain commit in sequence order (audit.seal holds
        # the chain's advisory lock until commit), so the highest committed
        # sequence is a head every later entry links back to; no lock needed
        # here. Unsealed entries have no place in the chain yet: not signed.
        heads = (
            AuditEntry.objects.filter(sequence__isnull=False)
            .order_by("project_id", "-sequence")
            .distinct("project_id")
            .values_list("project_id", "sequence", "entry_hash")
        )
        retrievals = _retrieval_extent()
        signed = {
            (c.project_id, c.sequence, c.entry_hash, c.retrievals_through)
            for c in AuditCheckpoint.objects.order_by("project_id", "-sequence", "-id").distinct("project_id")
        }
        now = datetime.now(UTC)
        created = []
        for project_id, sequence, entry_hash in heads:
            assert sequence is not None  # sealed entries only
            through, count = retrievals.get(project_id, (0, 0))
            if (project_id, sequence, entry_hash, through) in signed:
                continue
            created.append(
                AuditCheckpoint(
                    project_id=project_id,
                    sequence=sequence,
                    entry_hash=entry_hash,
                    created_at=now,
                    retrievals_through=through,
                    retrieval_count=count,
                    signature=sign(project_id, sequence, entry_hash, now, through, count),
                )
            )
        checkpoints = AuditCheckpoint.objects.bulk_create(created)
        projects = Project.objects.in_bulk([c.project_id for c in checkpoints if c.project_id])
        for checkpoint in checkpoints:
            project = projects.get(checkpoint.project_id) if checkpoint.project_id else None
            feed.announce_checkpoint(
                project, checkpoint.sequence, checkpoint.entry_hash, checkpoint.created_at
            )
        return checkpoints


def _retrieval_extent() -> dict[int | None, tuple[int, int]]:
    """Per project: the highest retrieval event id committed so far, and how many events
    have an id up to it (all of them, in this snapshot)."""
    return {
        row["project_id"]: (row["through"], row["count"])
        for row in RetrievalEvent.objects.order_by()
        .values("project_id")
        .annotate(through=Max("id"), count=Count("id"))
    }


def latest_checkpoints(project_id: int | None = None, *, only_project: bool = False) -> list[AuditCheckpoint]:
    """The newest checkpoint of each chain (or of one chain with ``only_project``)."""
    checkpoints = AuditCheckpoint.objects.order_by("project_id", "-sequence", "-id").distinct("project_id")
    if only_project:
        checkpoints = checkpoints.filter(_chain(project_id))
    return list(checkpoints)


def export(checkpoints: Iterable[AuditCheckpoint], path: str | os.PathLike[str]) -> int:
    """Append checkpoints to ``path`` as JSON lines, flushed to disk; how many were written."""
    checkpoints = list(checkpoints)
    slugs = dict(Project.objects.filter(pk__in={c.project_id for c in checkpoints}).values_list("pk", "slug"))
    lines = [
        json.dumps(
            {
                "project": c.project_id,
                "project_slug": slugs.get(c.project_id) if c.project_id is not None else None,
                "sequence": c.sequence,
                "entry_hash": c.entry_hash,
                "created_at": _timestamp(c.created_at),
                "retrievals_through": c.retrievals_through,
                "retrieval_count": c.retrieval_count,
                "signature": c.signature,
            },
            sort_keys=True,
        )
        + "\n"
        for c in checkpoints
    ]
    if not lines:
        return 0
    with open(path, "a", encoding="utf-8") as handle:
        handle.writelines(lines)
        handle.flush()
        os.fsync(handle.fileno())
    return len(lines)


def read_file(path: str | os.PathLike[str]) -> list[SignedHead]:
    """Every checkpoint in an exported file; a line that is not one stops the reading."""
    name = Path(path).name
    heads = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CheckpointFileError(f"cannot read the checkpoint file {path}: {exc.strerror}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item: dict[str, Any] = json.loads(line)
            project = item["project"]
            heads.append(
                SignedHead(
                    project_id=None if project is None else int(project),
                    sequence=int(item["sequence"]),
                    entry_hash=str(item["entry_hash"]),
                    created_at=datetime.fromisoformat(item["created_at"]),
                    retrievals_through=int(item["retrievals_through"]),
                    retrieval_count=int(item["retrieval_count"]),
                    signature=str(item["signature"]),
                    where=f"line {number} of {name}",
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointFileError(f"line {number} of {name} is not a checkpoint") from exc
    return heads


@dataclass(frozen=True)
class AlteredRetrieval:
    """Retrieval events that are not what was recorded: ``event_id`` names the event."""

    project_id: int
    event_id: int
    problem: str


def _forged(head: SignedHead) -> BrokenLink:
    return BrokenLink(
        head.project_id,
        head.sequence,
        None,
        f"the signature of {head.where} (entry #{head.sequence}, {head.when}) does not match: "
        "that checkpoint was not written by this service, or was changed afterwards",
    )


def _check_head(head: SignedHead) -> BrokenLink | AlteredRetrieval | None:
    entry = (
        AuditEntry.objects.filter(_chain(head.project_id), sequence=head.sequence)
        .values_list("pk", "entry_hash")
        .first()
    )
    if entry is None:
        last = (
            AuditEntry.objects.filter(_chain(head.project_id), sequence__isnull=False)
            .order_by("-sequence")
            .values_list("pk", "sequence")
            .first()
        )
        last = None if last is None else (last[0], int(last[1] or 0))
        if last is None:
            problem = (
                f"no entries remain, but {head.where} signed on {head.when} recorded "
                f"{head.sequence} {'entry' if head.sequence == 1 else 'entries'}: the whole chain was removed"
            )
            return BrokenLink(head.project_id, head.sequence, None, problem)
        missing = head.sequence - last[1]
        problem = (
            f"the chain ends at entry #{last[1]}, but {head.where} signed on {head.when} recorded "
            f"entry #{head.sequence}: the last {missing} {'entry was' if missing == 1 else 'entries were'} "
            "removed"
        )
        return BrokenLink(head.project_id, last[1], last[0], problem)
    if not hmac.compare_digest(entry[1], head.entry_hash):
        problem = (
            f"entry #{head.sequence} differs from {head.where} signed on {head.when}: "
            "the chain was rewritten at or before this entry and its hashes recomputed"
        )
        return BrokenLink(head.project_id, head.sequence, entry[0], problem)
    if head.retrieval_count and head.project_id is not None:
        present = RetrievalEvent.objects.filter(
            project_id=head.project_id, id__lte=head.retrievals_through
        ).count()
        expired = _expired_after(head)
        if present < head.retrieval_count - expired:
            missing = head.retrieval_count - expired - present
            problem = (
                f"{missing} of the {head.retrieval_count} events recorded up to event "
                f"{head.retrievals_through} by {head.where} signed on {head.when} "
                f"{'is gone: it was' if missing == 1 else 'are gone: they were'} deleted"
                + (f" ({expired} more were removed at the end of their retention period)" if expired else "")
            )
            return AlteredRetrieval(head.project_id, head.retrievals_through, problem)
    return None


def _expired_after(head: SignedHead) -> int:
    """How many of the events ``head`` counted were dropped by retention after it was signed.

    Each expired month left a ``retrievals.expired`` entry per project
    (services.retention). A month wholly within the head's range takes all its
    events; a month the range ends inside takes what the entry recorded for
    that checkpoint. An entry from before the head needs nothing: the head's
    count was taken after that month was gone.
    """
    expired = 0
    # After the head: sealed later, or not sealed yet.
    entries = AuditEntry.objects.filter(
        Q(sequence__gt=head.sequence) | Q(sequence__isnull=True), _chain(head.project_id), action=EXPIRED
    ).values_list("data", flat=True)
    for data in entries:
        count = int(data["count"])
        if int(data["last_id"]) <= head.retrievals_through:
            expired += count
        elif int(data["first_id"]) <= head.retrievals_through:
            # Every checkpoint in the database at expiry is recorded; a head
            # that is not (none should exist) is given the whole month.
            expired += int(data.get("counts_at_checkpoints", {}).get(str(head.retrievals_through), count))
    return expired


def verify_against(
    project_id: int | None = None, *, only_project: bool = False, file_heads: Iterable[SignedHead] = ()
) -> BrokenLink | AlteredRetrieval | None:
    """Check each chain against its latest checkpoint in the database and, when given,
    against the newest checkpoint of it in an exported file; the first problem, if any.

    Run it after ``audit.verify_chain``: that proves the links up to the head,
    this proves the head is where a signed checkpoint says it was.
    """
    newest: dict[int | None, SignedHead] = {}
    for head in file_heads:
        if only_project and head.project_id != project_id:
            continue
        # Every line's signature is checked, not only the newest: a forged line
        # is itself a sign of tampering with the copy.
        if not head.signed_correctly:
            return _forged(head)
        current = newest.get(head.project_id)
        if current is None or head.sequence > current.sequence:
            newest[head.project_id] = head
    stored = [SignedHead.of(c) for c in latest_checkpoints(project_id, only_project=only_project)]
    for head in stored:
        if not head.signed_correctly:
            return _forged(head)
    for head in [*stored, *newest.values()]:
        broken = _check_head(head)
        if broken is not None:
            return broken
    return None


def verify_retrieval_seals(
    project_id: int | None = None, *, only_project: bool = False
) -> AlteredRetrieval | None:
    """The first retrieval event whose stored text no longer matches its seal, if any."""
    events = RetrievalEvent.objects.order_by("id").values_list(
        "id", "project_id", "agent_id", "created_at", "query", "context", "candidate_data", "context_seal"
    )
    if only_project:
        events = events.filter(_chain(project_id))
    for event_id, project, agent, created_at, query, context, candidates, seal in events.iterator(
        chunk_size=2000
    ):
        if not seal:
            return AlteredRetrieval(
                project, event_id, f"event {event_id} has no seal: it was stored outside the application"
            )
        if not hmac.compare_digest(
            seal, seal_retrieval(project, agent, created_at, query, context, candidates)
        ):
            return AlteredRetrieval(
                project,
                event_id,
                f"event {event_id} does not match its seal: its query, context or candidates "
                "were changed outside the application "
                "(a withdrawal's redaction re-seals what it changes)",
            )
    return None
