"""A fact keeps its statement's claims, read once when the statement is stored.

Retrieval compares the claims of every eligible candidate (unkeyed
contradictions, R6): read from the row, a statement this process has not seen
is not read again (docs/performance.md, "the ninth round"). A nullable column
without a default: PostgreSQL adds it without rewriting the table. Existing
facts have none until ``manage.py store_fact_claims`` stores them (in batches,
a separate step); until then retrieval reads their statements as before.
Kept out of the facts' history: it is derived from the statement, which
history keeps.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0046_fact_lexical_signature"),
    ]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="claims",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
    ]
