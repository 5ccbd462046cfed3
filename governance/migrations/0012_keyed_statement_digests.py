"""Re-key every stored digest of erasable text with the tombstone key (issue 10 item 8, R8).

Until now ``statement_digest`` (facts, their history, audit data, hence
exports) and ``Write.request_digest`` (the idempotency digest of a body that
holds the statement) were plain SHA-256: anyone holding an export could hash a
guessed statement and confirm it, even after it was withdrawn. The new digest
is HMAC-SHA256 with ``settings.TOMBSTONE_KEY`` over that SHA-256
(``governance.rules.text.keyed_digest``), so a stored plain digest can be
re-keyed without its text, which withdrawn statements no longer have.

Facts, writes and their history rows are re-keyed in place, without new
history rows (the values mean the same; only their form changes) and without
tripping the append-only guard of the history tables (the erasure switch
withdrawal uses, for this transaction only).

The audit trail. Its entries hash their ``data``, and ``write.submitted`` and
``fact.withdrawn`` entries carry a ``statement_digest`` there. Leaving those
plain would keep exactly the confirmable hash this migration exists to remove;
re-keying them changes the hashed content. So, per project chain:

1. every chain is verified before anything changes, and the migration stops
   if one is already broken: re-linking a tampered chain would seal the
   tampering in, and that needs a person to look (``manage.py verify_audit``)
   before anything else;
2. the digests are re-keyed and every hash from the first changed entry on is
   recomputed, so ``verify_audit`` passes afterwards;
3. one ``audit.rekeyed`` entry is appended to each rewritten chain, naming the
   previous head hash and sequence, the first rewritten entry and how many were
   rewritten: whoever kept the old head hash can see where and why it changed.

The alternative, keeping the old hashes and sealing a new chain over re-keyed
copies, keeps the plain digests somewhere; a chain that can only be verified
by keeping the secret it must not keep is no improvement.

Run it before the new code serves requests (as with any migration of a
release): it re-keys every 64-hex digest it finds, and it would key twice a
digest the new code had already keyed. Its entries bypass the append-only
triggers with ``pgtrigger.ignore`` names set for this transaction only.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.db import migrations
from django.utils import timezone

from governance.rules.text import rekey_plain_digest
from governance.rules.audit import GENESIS, entry_digest

BATCH = 2000
HEX64 = re.compile(r"^[0-9a-f]{64}$")
ERASURE_SETTING = "memoryadmin.erasure"
DIGEST_FIELD = "statement_digest"

# (table, primary key, digest column): facts, writes and their row history.
COLUMNS = (
    ("governance_fact", "id", "statement_digest"),
    ("governance_factevent", "pgh_id", "statement_digest"),
    ("governance_write", "id", "request_digest"),
    ("governance_writeevent", "pgh_id", "request_digest"),
)
# Triggers this migration must step past: the history-recording UPDATE
# triggers of facts and writes (a re-key is no change of the fact) and the
# audit trail's append-only guard.
IGNORED_TRIGGERS = (
    ("governance_fact", "pgtrigger_update_update_%"),
    ("governance_write", "pgtrigger_update_update_%"),
    ("governance_auditentry", "pgtrigger_audit_no_update_%"),
)


def _key() -> bytes:
    return str(settings.TOMBSTONE_KEY).encode()


def _rekey(value: Any, key: bytes) -> Any:
    return rekey_plain_digest(value, key) if isinstance(value, str) and HEX64.match(value) else value


def _rekey_data(value: Any, key: bytes) -> Any:
    """Audit data with every ``statement_digest`` value re-keyed, at any depth."""
    if isinstance(value, dict):
        return {
            name: _rekey(item, key) if name == DIGEST_FIELD else _rekey_data(item, key)
            for name, item in value.items()
        }
    if isinstance(value, list):
        return [_rekey_data(item, key) for item in value]
    return value


def _step_past_triggers(cursor: Any) -> None:
    names: list[str] = []
    for table, pattern in IGNORED_TRIGGERS:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal AND tgname LIKE %s",
            [table, pattern],
        )
        names += [row[0] for row in cursor.fetchall()]
    # Both settings are local to this migration's transaction.
    cursor.execute("SELECT set_config('pgtrigger.ignore', %s, true)", ["{" + ",".join(names) + "}"])
    cursor.execute("SELECT set_config(%s, 'on', true)", [ERASURE_SETTING])


def _rekey_column(cursor: Any, table: str, pk: str, column: str, key: bytes) -> int:
    """Re-key one digest column in keyset-ordered batches; the number of rows changed."""
    changed = 0
    last = -1
    while True:
        # Names come from COLUMNS above, never from input.
        cursor.execute(
            f"SELECT {pk}, {column} FROM {table} WHERE {pk} > %s ORDER BY {pk} LIMIT %s", [last, BATCH]
        )
        rows = cursor.fetchall()
        if not rows:
            return changed
        last = rows[-1][0]
        updates = [(row_id, _rekey(value, key)) for row_id, value in rows if _rekey(value, key) != value]
        if updates:
            cursor.execute(
                f"UPDATE {table} AS t SET {column} = v.digest "
                f"FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS digest) AS v "
                f"WHERE t.{pk} = v.id",
                [[u[0] for u in updates], [u[1] for u in updates]],
            )
            changed += len(updates)


def _chain_break(entries: Any) -> str | None:
    """The first broken link of one chain, in the words of ``verify_audit``, or None."""
    previous, expected = GENESIS, 1
    for entry in entries:
        if entry.sequence != expected:
            return f"entry #{expected} is missing"
        if entry.previous_hash != previous:
            return f"entry #{entry.sequence} does not link to the entry before it"
        if entry_digest(entry) != entry.entry_hash:
            return f"entry #{entry.sequence}: content does not match its hash"
        previous, expected = entry.entry_hash, expected + 1
    return None


def _flush(cursor: Any, rows: list[tuple[int, str, str, str]]) -> None:
    if not rows:
        return
    cursor.execute(
        "UPDATE governance_auditentry AS a SET data = v.data::jsonb, previous_hash = v.previous, "
        "entry_hash = v.hash FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS data, "
        "unnest(%s::text[]) AS previous, unnest(%s::text[]) AS hash) AS v WHERE a.id = v.id",
        [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]],
    )
    rows.clear()


def _rekey_chain(apps: Any, cursor: Any, project_id: int | None, key: bytes) -> int:
    """Re-key one project's audit data and re-link its chain; the number of entries rewritten."""
    AuditEntry = apps.get_model("governance", "AuditEntry")
    chain = AuditEntry.objects.filter(project_id=project_id).order_by("sequence")
    previous = GENESIS
    head: tuple[int, str] | None = None
    first: int | None = None
    rewritten = 0
    pending: list[tuple[int, str, str, str]] = []
    for entry in chain.iterator(chunk_size=BATCH):
        head = (entry.sequence, entry.entry_hash)
        data = _rekey_data(entry.data, key)
        if data == entry.data and entry.previous_hash == previous:
            previous = entry.entry_hash
            continue
        entry.data = json.loads(json.dumps(data))
        entry.previous_hash = previous
        entry.entry_hash = entry_digest(entry)
        pending.append((entry.pk, json.dumps(entry.data), entry.previous_hash, entry.entry_hash))
        if len(pending) >= BATCH:
            _flush(cursor, pending)
        first = entry.sequence if first is None else first
        rewritten += 1
        previous = entry.entry_hash
    _flush(cursor, pending)
    if rewritten and head is not None:
        marker = AuditEntry(
            project_id=project_id,
            sequence=head[0] + 1,
            actor="system:migration",
            action="audit.rekeyed",
            object_type="audit",
            object_id=str(project_id or ""),
            reason=(
                "Statement digests in earlier entries were replaced by keyed digests, so a guessed "
                "statement can no longer be confirmed from this trail. The entries from the first "
                "changed one on were re-linked; the previous head is recorded here."
            ),
            data={
                "entries_rewritten": rewritten,
                "first_rewritten_sequence": first,
                "previous_head_sequence": head[0],
                "previous_head_hash": head[1],
            },
            request_id="",
            created_at=timezone.now(),
            previous_hash=previous,
        )
        marker.entry_hash = entry_digest(marker)
        marker.save(force_insert=True)
    return rewritten


def rekey_statement_digests(apps: Any, schema_editor: Any) -> None:
    key = _key()
    AuditEntry = apps.get_model("governance", "AuditEntry")
    projects = sorted(
        AuditEntry.objects.order_by().values_list("project_id", flat=True).distinct(),
        key=lambda p: (p is None, p or 0),
    )
    # Every chain is checked before anything changes.
    for project_id in projects:
        chain = AuditEntry.objects.filter(project_id=project_id).order_by("sequence")
        broken = _chain_break(chain.iterator(chunk_size=BATCH))
        if broken is not None:
            raise RuntimeError(
                f"The audit chain of project id {project_id} is already broken ({broken}). Re-keying "
                "it would re-seal the chain and hide that; run `manage.py verify_audit` and "
                "investigate before migrating."
            )
    with schema_editor.connection.cursor() as cursor:
        _step_past_triggers(cursor)
        for table, pk, column in COLUMNS:
            _rekey_column(cursor, table, pk, column, key)
        for project_id in projects:
            _rekey_chain(apps, cursor, project_id, key)
        cursor.execute("SELECT set_config(%s, 'off', true)", [ERASURE_SETTING])
        cursor.execute("SELECT set_config('pgtrigger.ignore', NULL, true)")


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0011_second_approval"),
    ]

    operations = [
        # Not reversible: the plain digests are what this removes.
        migrations.RunPython(rekey_statement_digests, migrations.RunPython.noop, elidable=False),
    ]
