"""Indexes that serve a write's look-ups in the order they read, for any size of principal.

A write's look-ups (``services.writes._what_the_write_meets``) are prepared
once per connection, so PostgreSQL plans them once, for no principal in
particular. Such a plan read the two pools of a large principal out of heap
order and sorted them: the 200 newest active facts of the write's kind (the
near-duplicate test) and the 200 newest active observations (the unkeyed
contradiction test), ~6,500 rows for the largest bench principal. Two partial
indexes give both pools in their order, so either plan stops after 200.

The fingerprint index becomes (project, principal, fingerprint): every look-up
of a statement's copies is within one principal or the project's own facts,
and a plan made for no value in particular must not read every fact in the
table that repeats a statement many people share. With the kind left out of
it, the near-duplicate index is no cheaper in the planner's eyes for the
exact-duplicate probe (which names the kind only in its aggregate's FILTER).

Built concurrently, like 0037 and 0040: facts are written all the time. The
new indexes come first, so there is no moment without one.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("governance", "0043_fact_meaning_check_pending"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("status", "active")),
                fields=["project", "principal", "kind", "id"],
                name="fact_active_kind_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("status", "active")),
                fields=["project", "principal", "source_observed_at", "id"],
                name="fact_active_observed_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="fact",
            index=models.Index(
                fields=["project", "principal", "fingerprint"], name="fact_principal_fingerprint_idx"
            ),
        ),
        RemoveIndexConcurrently(
            model_name="fact",
            name="fact_fingerprint_idx",
        ),
    ]
