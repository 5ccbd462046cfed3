"""A principal's facts in the order of their last status change, as the principal's index.

A first round's history part (``selectors.retrievals``, R14) explains the
newest 200 of a principal's facts that do not stand (superseded, withdrawn,
expired, stale, below the authority floor). Read through the foreign key's
index on ``principal_id`` alone, PostgreSQL fetched every row of the
principal and sorted them: 8,107 rows and 12-18 ms for the largest bench
principal, to keep 200. With (principal, status_changed_at DESC, id DESC)
it walks the principal's facts newest change first and stops at the 200th
that does not stand (about 2 ms there).

It does so only when the part names the principal alone (its id implies the
project): named with the project, PostgreSQL multiplies the two columns'
selectivities as if they were independent, expects a tenth of the rows
(940 instead of 8,107 at 1 M facts) and sorts them. Extended statistics on
the two columns would correct that estimate too, but they change it for
every statement naming both, and moved the review queue's similar-facts
read of a large principal off the index it reads in order (1 -> 15 ms):
not taken.

The new index starts with the principal, so it also serves everything the
foreign key's index did (a principal's facts, the PROTECT check when a
principal goes): that index is dropped, and a fact's INSERT still updates
as many indexes as before. Built concurrently, like 0044: facts are written
all the time. The new index comes first, so there is no moment without one.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


def _drop_foreign_key_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Drop the index Django made for ``Fact.principal`` (its name is a hash: looked up)."""
    Fact = apps.get_model("governance", "Fact")
    table = Fact._meta.db_table
    column = Fact._meta.get_field("principal").column
    with schema_editor.connection.cursor() as cursor:
        names = schema_editor._constraint_names(Fact, [column], index=True, unique=False, primary_key=False)
        for name in names:
            cursor.execute(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = %s AND i.indrelid = %s::regclass AND i.indnatts = 1",
                [name, table],
            )
            if cursor.fetchone():
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")


def _restore_foreign_key_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    Fact = apps.get_model("governance", "Fact")
    field = Fact._meta.get_field("principal")
    name = schema_editor._create_index_name(Fact._meta.db_table, [field.column], suffix="")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {schema_editor.quote_name(name)} "
            f"ON {schema_editor.quote_name(Fact._meta.db_table)} ({schema_editor.quote_name(field.column)})"
        )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("governance", "0047_fact_stored_claims"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="fact",
            index=models.Index(
                fields=["principal", "-status_changed_at", "-id"], name="fact_principal_changed_idx"
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="fact",
                    name="principal",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=models.deletion.PROTECT,
                        related_name="facts",
                        to="governance.principal",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunPython(_drop_foreign_key_index, _restore_foreign_key_index),
            ],
        ),
    ]
