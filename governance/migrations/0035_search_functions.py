"""Search functions that can use the indexes of 0031 for the application role.

Under row-level security PostgreSQL checks a table's policy before any
condition that is not leakproof; ``@@`` and ``LIKE`` are not, so for the
application role they were filters after the policy, never index conditions
(docs/console.md, "Finding anything"). These SECURITY DEFINER functions, owned
by the role that runs migrations (which the policies do not bind), run the
indexed match themselves and return ids and rank; the console then reads those
rows through the policy as usual.

They must not widen what a caller sees, so each keeps a row only when its
project is among the ids passed in AND passes ``governance_project_in_scope``,
the very check the policies make, which reads the caller's own
``memoryadmin.projects`` setting of the current transaction (a SECURITY DEFINER
function changes the role, not the settings). Passing another project's id
finds nothing.

The expressions repeat governance/models/search.py exactly, or the expression
indexes would not match: ``to_tsvector('simple', COALESCE(col, ''))`` (Django's
``SearchVector``) against
``websearch_to_tsquery('simple', q)``, and ``UPPER(col) LIKE UPPER('%q%')``
with ``%``, ``_`` and ``\\`` in q escaped as Django's ``icontains`` does.
"""

from django.db import migrations

# table, column, function name; writes also take the statuses wanted.
SEARCHES = (
    ("governance_fact", "statement", "governance_search_facts"),
    ("governance_write", "statement", "governance_search_writes"),
    ("governance_retrievalevent", "query", "governance_search_retrievals"),
)

# No limit (NULL) returns every match, for the filtered lists that page through them.
BODY = r"""
CREATE FUNCTION {function}(p_projects bigint[], p_text text, p_limit integer{extra_args})
RETURNS TABLE (id bigint, rank real)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT t.id, ts_rank(to_tsvector('simple'::regconfig, COALESCE(t.{column}, '')),
                         websearch_to_tsquery('simple'::regconfig, p_text))
      FROM public.{table} t
     WHERE t.project_id = ANY (p_projects)
       AND public.governance_project_in_scope(t.project_id)
       {extra_where}
       AND (to_tsvector('simple'::regconfig, COALESCE(t.{column}, ''))
                @@ websearch_to_tsquery('simple'::regconfig, p_text)
            OR UPPER(t.{column}) LIKE UPPER('%' || replace(replace(replace(
                   p_text, '\', '\\'), '%', '\%'), '_', '\_') || '%'))
     ORDER BY 2 DESC, t.id DESC
     LIMIT p_limit
$$;
"""


def create(table: str, column: str, function: str) -> str:
    writes = table == "governance_write"
    return BODY.format(
        function=function,
        table=table,
        column=column,
        extra_args=", p_statuses text[]" if writes else "",
        # NULL statuses: any status.
        extra_where="AND (p_statuses IS NULL OR t.status = ANY (p_statuses))" if writes else "",
    )


def drop(table: str, function: str) -> str:
    extra = ", text[]" if table == "governance_write" else ""
    return f"DROP FUNCTION {function}(bigint[], text, integer{extra});"


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0034_retrieval_event_partitions"),
    ]

    operations = [
        migrations.RunSQL(create(table, column, function), drop(table, function))
        for table, column, function in SEARCHES
    ]
