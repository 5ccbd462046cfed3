"""Less for the database to do when a write is stored: 28 indexes fewer, two triggers that wait for a value.

- History rows (the event tables of django-pghistory) copy every foreign key of
  the row they record, and each copy had an index of its own: eight on a
  write's history, five on a fact's. They have no constraint to check, and
  every read of history asks for the row it records (``pgh_obj_id``: a fact's
  timeline, erasure, replay, the soak test), never for a copied key. All 26
  go (``PGHISTORY_FOREIGN_KEY_FIELD`` in settings); ``pgh_obj_id`` keeps its
  index. The operator's history browser in the Django admin, which can list
  the events that merely mention an object, then scans those tables.
- An audit entry's project and a principal's project had indexes that a
  composite index already starts with (audit_recent_idx,
  principal_external_id_unique), which answers the same look-ups and the
  foreign keys' checks.
- A fact's and a write's check that the retrieval they derive from exists
  (a trigger, since events are partitioned: 0034) ran at every commit for every
  row, copying the whole row into JSON to read one column that is almost always
  empty. It is queued only when there is a retrieval to check (a constraint
  trigger's WHEN is evaluated when the row is written); the check itself is
  unchanged.
"""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

REFERENCE_CHECKS = {
    "governance_write_retrieval_exists": "governance_write",
    "governance_fact_retrieval_exists": "governance_fact",
}


def _reference_check(name: str, table: str, *, when: bool) -> str:
    condition = "WHEN (NEW.derived_from_retrieval_id IS NOT NULL) " if when else ""
    return (
        f"DROP TRIGGER {name} ON {table}; "
        f"CREATE CONSTRAINT TRIGGER {name} AFTER INSERT OR UPDATE OF derived_from_retrieval_id ON {table} "
        f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW {condition}"
        "EXECUTE FUNCTION governance_retrieval_reference_exists('derived_from_retrieval_id')"
    )


FORWARD = [_reference_check(name, table, when=True) for name, table in REFERENCE_CHECKS.items()]
BACKWARD = [_reference_check(name, table, when=False) for name, table in REFERENCE_CHECKS.items()]

# (event model, copied foreign key, the model it names, nullable)
HISTORY_KEYS = [
    ("agentevent", "active_policy", "governance.policyversion", True),
    ("agentevent", "project", "governance.project", False),
    ("agentkeyevent", "agent", "governance.agent", False),
    ("agentkeyevent", "created_by", settings.AUTH_USER_MODEL, True),
    ("factevent", "agent", "governance.agent", True),
    ("factevent", "derived_from_retrieval", "governance.retrievalevent", True),
    ("factevent", "principal", "governance.principal", True),
    ("factevent", "project", "governance.project", False),
    ("factevent", "session", "governance.session", True),
    ("personalaccesstokenevent", "user", settings.AUTH_USER_MODEL, False),
    ("policydraftevent", "agent", "governance.agent", False),
    ("policydraftevent", "based_on", "governance.policyversion", True),
    ("policydraftevent", "updated_by", settings.AUTH_USER_MODEL, True),
    ("reviewdecisionevent", "reviewer", settings.AUTH_USER_MODEL, False),
    ("reviewdecisionevent", "write", "governance.write", False),
    ("supersessionevent", "new_fact", "governance.fact", False),
    ("supersessionevent", "old_fact", "governance.fact", False),
    ("supersessionevent", "write", "governance.write", True),
    ("writeevent", "agent", "governance.agent", True),
    ("writeevent", "conflicts_with", "governance.fact", True),
    ("writeevent", "corroborated", "governance.fact", True),
    ("writeevent", "derived_from_retrieval", "governance.retrievalevent", True),
    ("writeevent", "fact", "governance.fact", True),
    ("writeevent", "principal", "governance.principal", True),
    ("writeevent", "project", "governance.project", False),
    ("writeevent", "session", "governance.session", True),
]


def _history_key(to: str, *, null: bool) -> models.ForeignKey[Any, Any]:
    """A foreign key as django-pghistory copies it into a history row, now without an index."""
    return models.ForeignKey(
        blank=null,
        db_constraint=False,
        db_index=False,
        null=null,
        on_delete=django.db.models.deletion.DO_NOTHING,
        related_name="+",
        related_query_name="+",
        to=to,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0044_write_lookup_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        *(
            migrations.AlterField(model_name=model, name=name, field=_history_key(to, null=null))
            for model, name, to, null in HISTORY_KEYS
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="project",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="governance.project",
            ),
        ),
        migrations.AlterField(
            model_name="principal",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="principals",
                to="governance.project",
            ),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
