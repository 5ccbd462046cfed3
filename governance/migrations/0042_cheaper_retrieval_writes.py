"""Less for the database to do when a retrieval is written: six indexes fewer.

Six single-column foreign-key indexes that a composite index already starts
with, which answers the same look-ups and the foreign keys' checks: a
retrieval event's agent, principal and project (retrieval_agent_log_idx,
retrieval_principal_log_idx, retrieval_log_idx; one index per monthly
partition each), a session's agent and principal (session_external_id_unique,
session_principal_idx) and a session block's session
(session_block_key_unique). Every event, first-round session and start block
wrote them.

The index names are Django's, derived from table and column, so the same in
every database this project migrated.
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

DROPPED = {
    "governance_retrievalevent_agent_id_5ef43dba": "governance_retrievalevent (agent_id)",
    "governance_retrievalevent_principal_id_6ef70dad": "governance_retrievalevent (principal_id)",
    "governance_retrievalevent_project_id_e6844d79": "governance_retrievalevent (project_id)",
    "governance_session_agent_id_13e184c3": "governance_session (agent_id)",
    "governance_session_principal_id_9546349d": "governance_session (principal_id)",
    "governance_sessionblock_session_id_2b76d071": "governance_sessionblock (session_id)",
}

FORWARD = tuple(f"DROP INDEX IF EXISTS {name}" for name in DROPPED)
BACKWARD = tuple(f"CREATE INDEX IF NOT EXISTS {name} ON {target}" for name, target in DROPPED.items())


def _foreign_key(
    to: str, related_name: str, *, on_delete: Any = django.db.models.deletion.PROTECT, null: bool = False
) -> models.ForeignKey[Any, Any]:
    return models.ForeignKey(
        blank=null,
        db_index=False,
        null=null,
        on_delete=on_delete,
        related_name=related_name,
        to=to,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0041_fewer_redundant_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AlterField(
                    model_name="retrievalevent",
                    name="agent",
                    field=_foreign_key("governance.agent", "retrievals"),
                ),
                migrations.AlterField(
                    model_name="retrievalevent",
                    name="principal",
                    field=_foreign_key("governance.principal", "retrievals", null=True),
                ),
                migrations.AlterField(
                    model_name="retrievalevent",
                    name="project",
                    field=_foreign_key("governance.project", "retrievals"),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="agent",
                    field=_foreign_key("governance.agent", "sessions"),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="principal",
                    field=_foreign_key("governance.principal", "sessions", null=True),
                ),
                migrations.AlterField(
                    model_name="sessionblock",
                    name="session",
                    field=_foreign_key(
                        "governance.session", "blocks", on_delete=django.db.models.deletion.CASCADE
                    ),
                ),
            ],
        ),
    ]
