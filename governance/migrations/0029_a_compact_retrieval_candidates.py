"""Retrieval candidates move into their event's row (issue 13, "one row per retrieval").

Schema only: the compact document and the two id arrays with their GIN
indexes. 0029_b moves the existing candidate rows over; 0029_c drops their table.
"""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0028_change_feed"),
    ]

    operations = [
        migrations.AddField(
            model_name="retrievalevent",
            name="candidate_data",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="retrievalevent",
            name="candidate_fact_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(), default=list, size=None
            ),
        ),
        migrations.AddField(
            model_name="retrievalevent",
            name="selected_fact_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(), default=list, size=None
            ),
        ),
        migrations.AddIndex(
            model_name="retrievalevent",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["candidate_fact_ids"], name="retrieval_candidate_facts_gin"
            ),
        ),
        migrations.AddIndex(
            model_name="retrievalevent",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["selected_fact_ids"], name="retrieval_selected_facts_gin"
            ),
        ),
    ]
