"""Three indexes fewer on facts and writes, which every write maintains and every plan weighs.

- The fingerprints are compared for equality only, but ``db_index=True`` on a
  CharField also builds a ``varchar_pattern_ops`` twin for LIKE: never used,
  as large as the index itself (12 MB per 100,000 facts). The twins go; the
  plain indexes stay, renamed to the names the models now give them
  (a rename touches no row).
- A fact's project and a write's agent had indexes of their own that
  composite indexes already start with (fact_principal_verified_idx,
  fact_principal_key_idx, fact_project_status_idx; write_agent_recent_idx),
  which answer the same look-ups and the foreign keys' checks.

The index names are Django's, derived from table and column, so the same in
every database this project migrated.
"""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = (
    "DROP INDEX IF EXISTS governance_fact_fingerprint_76b423cf_like",
    "ALTER INDEX governance_fact_fingerprint_76b423cf RENAME TO fact_fingerprint_idx",
    "DROP INDEX IF EXISTS governance_fact_project_id_7a77d335",
    "DROP INDEX IF EXISTS governance_write_fingerprint_b22aae31_like",
    "ALTER INDEX governance_write_fingerprint_b22aae31 RENAME TO write_fingerprint_idx",
    "DROP INDEX IF EXISTS governance_write_agent_id_f5f760e0",
)
BACKWARD = (
    "CREATE INDEX governance_write_agent_id_f5f760e0 ON governance_write (agent_id)",
    "ALTER INDEX write_fingerprint_idx RENAME TO governance_write_fingerprint_b22aae31",
    "CREATE INDEX governance_write_fingerprint_b22aae31_like ON governance_write"
    " (fingerprint varchar_pattern_ops)",
    "CREATE INDEX governance_fact_project_id_7a77d335 ON governance_fact (project_id)",
    "ALTER INDEX fact_fingerprint_idx RENAME TO governance_fact_fingerprint_76b423cf",
    "CREATE INDEX governance_fact_fingerprint_76b423cf_like ON governance_fact (fingerprint varchar_pattern_ops)",
)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0040_write_held_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AlterField(
                    model_name="fact",
                    name="fingerprint",
                    field=models.CharField(max_length=64),
                ),
                migrations.AlterField(
                    model_name="fact",
                    name="project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="facts",
                        to="governance.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="write",
                    name="agent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="writes",
                        to="governance.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="write",
                    name="fingerprint",
                    field=models.CharField(max_length=64),
                ),
                migrations.AddIndex(
                    model_name="fact",
                    index=models.Index(fields=["fingerprint"], name="fact_fingerprint_idx"),
                ),
                migrations.AddIndex(
                    model_name="write",
                    index=models.Index(fields=["fingerprint"], name="write_fingerprint_idx"),
                ),
            ],
        ),
    ]
