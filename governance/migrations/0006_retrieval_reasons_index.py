"""GIN index for the retrieval log's exclusion-reason filter (issue 4 item 7, bench/retrieval_log.py)."""

import django.contrib.postgres.indexes
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    # Built concurrently: every agent retrieval inserts into this table, and a plain CREATE INDEX
    # would block those inserts for as long as the build takes on millions of rows.
    atomic = False

    dependencies = [
        ("governance", "0005_fact_summary_source"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="retrievalevent",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["reasons"], name="retrieval_reasons_gin", opclasses=["jsonb_path_ops"]
            ),
        ),
    ]
