"""Row-level security by project on facts, writes, retrieval events and audit entries.

A second line behind the application's own project checks (R1): the
application role sees and writes only rows of the projects named in the
transaction's ``memoryadmin.projects`` setting ("all" for system work), and
nothing when it is unset. governance/rls.py sets it; the owner role is not
subject to these policies (migrations, the SECURITY DEFINER erasure function).
Audit entries without a project are visible to system work only.
"""

from django.db import migrations

TABLES = ("governance_fact", "governance_write", "governance_retrievalevent", "governance_auditentry")

IN_SCOPE = r"""
CREATE FUNCTION governance_project_in_scope(project bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(
        current_setting('memoryadmin.projects', true) = 'all'
        OR project = ANY (
            string_to_array(NULLIF(current_setting('memoryadmin.projects', true), ''), ',')::bigint[]
        ),
        false
    )
$$;
"""


def enable(table: str) -> str:
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY; "
        f"CREATE POLICY project_scope ON {table} "
        f"USING (governance_project_in_scope(project_id)) "
        f"WITH CHECK (governance_project_in_scope(project_id));"
    )


def disable(table: str) -> str:
    return f"DROP POLICY project_scope ON {table}; ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0024_b_guarded_append_only_triggers"),
    ]

    operations = [
        migrations.RunSQL(IN_SCOPE, "DROP FUNCTION governance_project_in_scope(bigint);"),
        *(migrations.RunSQL(enable(table), disable(table)) for table in TABLES),
    ]
