# Every write counts its agent's derived writes of the last hour (R16); this
# partial index holds only derived writes, so the count no longer walks all of
# the agent's recent writes (issue 13). Built concurrently: the writes table is
# the busiest the product has, and a plain CREATE INDEX would stop writes while
# it is built.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("governance", "0036_events_naming_a_fact"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="write",
            index=models.Index(
                condition=models.Q(("derived_from_retrieval__isnull", False)),
                fields=["agent", "created_at"],
                name="write_agent_derived_idx",
            ),
        ),
    ]
