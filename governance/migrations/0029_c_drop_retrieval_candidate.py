"""The candidate rows now live in their events (0029_b): their table goes, with its triggers."""

import pgtrigger.migrations
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0029_b_move_candidates_into_events"),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(model_name="retrievalcandidate", name="candidate_no_delete"),
        pgtrigger.migrations.RemoveTrigger(model_name="retrievalcandidate", name="candidate_no_update"),
        pgtrigger.migrations.RemoveTrigger(model_name="retrievalcandidate", name="candidate_no_truncate"),
        migrations.DeleteModel(name="RetrievalCandidate"),
    ]
