"""Which retrieval events named a fact, answered by the GIN indexes for the application role.

Under row-level security PostgreSQL evaluates the policy before any operator
that is not leakproof, so for the application role ``candidate_fact_ids @>``
never used its GIN index: "which retrievals saw / injected this fact" read
every event of the person's projects (3.5 s for a fact's timeline at 1 M
events). These functions run as their owner, which the policies do not bind,
use the indexes, and apply the very same project check as the policies
(``governance_project_in_scope``, migration 0024_c), so they return nothing
the caller could not read; callers still read the events themselves under the
policy (docs/performance.md, "Row-level security and indexes").
"""

from django.db import migrations

FUNCTIONS = r"""
CREATE FUNCTION governance_events_with_candidate(fact bigint) RETURNS SETOF bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT id FROM governance_retrievalevent
     WHERE candidate_fact_ids @> ARRAY[fact] AND governance_project_in_scope(project_id)
$$;
CREATE FUNCTION governance_events_with_selected(fact bigint) RETURNS SETOF bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT id FROM governance_retrievalevent
     WHERE selected_fact_ids @> ARRAY[fact] AND governance_project_in_scope(project_id)
$$;
"""

DROP = """
DROP FUNCTION governance_events_with_candidate(bigint);
DROP FUNCTION governance_events_with_selected(bigint);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0035_search_functions"),
    ]

    operations = [migrations.RunSQL(FUNCTIONS, DROP)]
