"""Facts keep a lexical signature of their statement (issue 13, rules/text.py).

A write reads only the facts whose signature admits a near-duplicate of its
statement, instead of preparing up to 200 statements in Python. A constant
default rewrites nothing: existing facts have 0, which is always compared, and
``manage.py sign_statements`` gives them their signatures in batches.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0045_cheaper_write_inserts"),
    ]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="lexical_signature",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
    ]
