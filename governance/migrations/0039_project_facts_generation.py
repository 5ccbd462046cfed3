"""A generation number per project that moves with every change to its principal-less facts.

Retrieval caches a project's facts in process memory keyed by this number
(selectors/retrievals.py, "Project facts"). A trigger rather than calls in
each service: every insert, update or delete of a project fact (writes,
reviews, withdrawals, expiry, erasure, the embedding worker, a raw UPDATE)
moves the number in its own transaction, so a withdrawn or superseded
project fact can never be served from the cache. The number comes from a
sequence, never from a counter: a rolled-back change leaves no value that a
later, different state of the facts could take again.
"""

import django.db.models.deletion
from django.db import migrations, models

TRIGGER = r"""
CREATE SEQUENCE governance_project_facts_generation_seq;

CREATE FUNCTION governance_bump_project_facts() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.project_id ELSE NEW.project_id END;
BEGIN
    INSERT INTO governance_projectfactsgeneration (project_id, generation)
    VALUES (changed, nextval('governance_project_facts_generation_seq'))
    ON CONFLICT (project_id) DO UPDATE SET generation = EXCLUDED.generation;
    IF TG_OP = 'UPDATE' AND OLD.project_id <> NEW.project_id THEN
        INSERT INTO governance_projectfactsgeneration (project_id, generation)
        VALUES (OLD.project_id, nextval('governance_project_facts_generation_seq'))
        ON CONFLICT (project_id) DO UPDATE SET generation = EXCLUDED.generation;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER governance_project_facts_inserted AFTER INSERT ON governance_fact
    FOR EACH ROW WHEN (NEW.principal_id IS NULL) EXECUTE FUNCTION governance_bump_project_facts();
CREATE TRIGGER governance_project_facts_updated AFTER UPDATE ON governance_fact
    FOR EACH ROW WHEN (OLD.principal_id IS NULL OR NEW.principal_id IS NULL)
    EXECUTE FUNCTION governance_bump_project_facts();
CREATE TRIGGER governance_project_facts_deleted AFTER DELETE ON governance_fact
    FOR EACH ROW WHEN (OLD.principal_id IS NULL) EXECUTE FUNCTION governance_bump_project_facts();
"""

DROP = """
DROP TRIGGER governance_project_facts_inserted ON governance_fact;
DROP TRIGGER governance_project_facts_updated ON governance_fact;
DROP TRIGGER governance_project_facts_deleted ON governance_fact;
DROP FUNCTION governance_bump_project_facts();
DROP SEQUENCE governance_project_facts_generation_seq;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0038_audit_sealed_in_batches"),
    ]

    operations = [
        migrations.CreateModel(
            name="ProjectFactsGeneration",
            fields=[
                (
                    "project",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="governance.project",
                    ),
                ),
                ("generation", models.BigIntegerField()),
            ],
        ),
        migrations.RunSQL(TRIGGER, DROP),
    ]
