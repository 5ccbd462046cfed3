# The review queue's chart counts, per day, the writes of the last week that
# arrived needing review (selectors.queue_health.findings_over_time). They are
# about one write in twenty; without an index of their own the chart read every
# write of the project's last week (1,512 table pages for 266 rows, 34 ms at
# 200 k writes). Built concurrently, like 0037: the writes table is the busiest.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("governance", "0039_project_facts_generation"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="write",
            index=models.Index(
                condition=models.Q(("outcome__in", ["pending_review", "quarantined"])),
                fields=["project", "created_at"],
                name="write_held_idx",
            ),
        ),
    ]
