"""Less for the database to do when a retrieval is written: six indexes fewer, and lz4 where the server has it.

- Six single-column foreign-key indexes that a composite index already starts
  with, which answers the same look-ups and the foreign keys' checks: a
  retrieval event's agent, principal and project (retrieval_agent_log_idx,
  retrieval_principal_log_idx, retrieval_log_idx; one index per monthly
  partition each), a session's agent and principal
  (session_external_id_unique, session_principal_idx) and a session block's
  session (session_block_key_unique). Every event, first-round session and
  start block wrote them.
- The columns a retrieval writes large values into (an event's candidate
  document and context, a start block's text and items) are compressed with
  lz4 instead of pglz when the server was built with lz4, as most packaged
  PostgreSQL servers are: pglz was the largest single cost of writing a first
  round's event. Set on the table and on each partition (PostgreSQL does not
  pass it down to existing partitions; new ones take the table's). A server
  without lz4 (the embedded one) keeps pglz. Stored values are unchanged:
  compression is how a value sits on disk, chosen per value, and rows written
  before keep theirs.

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

# The columns, per table; the events' partitions are found in the catalogue.
COMPRESSED = {
    "governance_retrievalevent": ("candidate_data", "context"),
    "governance_sessionblock": ("text", "items"),
}


def _compression_sql(method: str) -> str:
    """One DO block setting ``method`` on COMPRESSED's columns of each table and event partition.

    With lz4 on a server built without it, PostgreSQL raises
    feature_not_supported: nothing is changed and pglz stays.
    """
    tables = ", ".join(f"'{table}'" for table in COMPRESSED)
    clauses = {
        table: ", ".join(f"ALTER COLUMN {column} SET COMPRESSION {method}" for column in columns)
        for table, columns in COMPRESSED.items()
    }
    cases = " ".join(f"WHEN '{table}' THEN '{clause}'" for table, clause in clauses.items())
    return f"""
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname, CASE root.relname {cases} END AS clause
        FROM pg_class root
        JOIN pg_class c ON c.oid = root.oid
            OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = root.oid)
        WHERE root.relnamespace = 'public'::regnamespace AND root.relname IN ({tables})
    LOOP
        EXECUTE format('ALTER TABLE public.%I ', t.relname) || t.clause;
    END LOOP;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'This PostgreSQL server has no lz4: retrieval events stay compressed with pglz.';
END
$$;
"""


FORWARD = (
    *(f"DROP INDEX IF EXISTS {name}" for name in DROPPED),
    _compression_sql("lz4"),
)
BACKWARD = (
    _compression_sql("default"),
    *(f"CREATE INDEX IF NOT EXISTS {name} ON {target}" for name, target in DROPPED.items()),
)


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
