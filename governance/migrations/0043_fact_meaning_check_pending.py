"""A fact can owe the write guard's second look at its meaning (issue 13, R5).

A plain statement (rules/guard_plain.py) is answered on the guard's patterns and
read by the meaning model in the background; the column says the model has not
read it yet. Adding a column with a constant default rewrites nothing; the
partial index holds only the facts still owed the look, for the sweep.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0042_cheaper_retrieval_writes"),
    ]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="meaning_check_pending",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("meaning_check_pending", True)),
                fields=["id"],
                name="fact_meaning_pending_idx",
            ),
        ),
    ]
