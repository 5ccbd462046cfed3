"""Seal the retrieval events stored before seals existed (see RetrievalEvent's docstring).

This seals the text as it is now: whatever was changed in it before this
migration is beyond what a seal can show. Run ``manage.py verify_audit`` first
if in doubt about the audit chain. The append-only guard of retrieval events
admits these UPDATEs through the erasure switch, for this transaction only.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import migrations

from governance.rules.seals import retrieval_seal

BATCH = 2000
ERASURE_SETTING = "memoryadmin.erasure"


def seal_existing(apps: Any, schema_editor: Any) -> None:
    key = str(settings.AUDIT_CHECKPOINT_KEY).encode()
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, 'on', true)", [ERASURE_SETTING])
        last = 0
        while True:
            cursor.execute(
                "SELECT id, project_id, agent_id, created_at, query, context FROM governance_retrievalevent "
                "WHERE id > %s AND context_seal = '' ORDER BY id LIMIT %s",
                [last, BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                break
            last = rows[-1][0]
            seals = [
                retrieval_seal(
                    key,
                    project_id=project,
                    agent_id=agent,
                    created_at=created_at,
                    query=query,
                    context=context,
                )
                for _, project, agent, created_at, query, context in rows
            ]
            cursor.execute(
                "UPDATE governance_retrievalevent AS t SET context_seal = v.seal "
                "FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS seal) AS v WHERE t.id = v.id",
                [[row[0] for row in rows], seals],
            )
        cursor.execute("SELECT set_config(%s, 'off', true)", [ERASURE_SETTING])


class Migration(migrations.Migration):
    dependencies = [("governance", "0016_retrieval_seals_and_checkpoint_coverage")]

    operations = [migrations.RunPython(seal_existing, migrations.RunPython.noop)]
