"""The principal's facts by status and verification time (issue 13).

The new index answers R9's "newest verification of the principal's active
facts" with one probe instead of an aggregate over every row; it leads with
the old index's columns, so it serves the old one's queries and replaces it.
Added before the old one is dropped, so there is no moment without either.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0021_fact_unembedded_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                fields=["project", "principal", "status", "last_verified_at"],
                name="fact_principal_verified_idx",
            ),
        ),
        migrations.RemoveIndex(
            model_name="fact",
            name="fact_principal_status_idx",
        ),
    ]
