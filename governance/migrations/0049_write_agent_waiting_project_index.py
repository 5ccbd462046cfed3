"""An agent's writes waiting for review, counted from the index alone.

Every write counts the agent's writes waiting for a reviewer, for the
per-agent limit (``MAX_PENDING_WRITES_PER_AGENT``). Row-level security adds
a filter on the project to that count, and ``write_agent_waiting_idx`` held
only the agent: PostgreSQL fetched every waiting write's row from the table
to read its project. With 1,859 writes waiting (the 1 M bench's agent) that
was 1,059 table pages and ~1.5 ms of a ~2.2 ms look-up, on every write,
growing with the agent's backlog rather than with anything the write
touches. Carrying the project in the index (INCLUDE) lets the count be an
index-only scan (0.36 ms there); the count also stops at the limit now
(``services.writes``), which bounds it whatever the backlog.

Built concurrently, like 0048: writes arrive all the time. The new index
comes first and the old one goes after, so there is no moment without one.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("governance", "0048_fact_principal_changed_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="write",
            index=models.Index(
                condition=models.Q(("status__in", ["pending_review", "quarantined"])),
                fields=["agent"],
                include=["project"],
                name="write_agent_waiting_proj_idx",
            ),
        ),
        RemoveIndexConcurrently(model_name="write", name="write_agent_waiting_idx"),
    ]
