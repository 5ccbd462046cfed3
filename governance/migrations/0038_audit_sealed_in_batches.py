"""Audit entries are appended unsealed and sealed into the chain afterwards (issue 13).

Writers of one project no longer take the chain's advisory lock: an entry is
inserted with no sequence and no hashes, and the sealer
(``governance.services.audit.seal``) gives committed entries their place.

- ``governance_audit_sealing()``: is this UPDATE the sealing function's? True
  only while ``governance_seal_audit_entries`` runs (a transaction-local flag it
  sets) and the current role owns the audit table (inside that SECURITY
  DEFINER function it does; the application role never does, so setting the
  flag by hand gets it nothing). The append-only trigger lets an UPDATE
  through only when this holds, the row was unsealed, and nothing but the
  three sealing columns changes (``models.audit.SEALING``).
- ``governance_seal_audit_entries(project, ids, hashes)``: SECURITY DEFINER,
  owned by the owner role, the one door for sealing. It takes the chain's
  advisory lock, reads the sealed head, and gives the entries ``ids`` (in that
  order) the next sequence numbers, each the previous entry's hash and the
  hash the caller computed (the chain's hash is Python's, ``rules/audit.py``;
  ``verify_audit`` recomputes every one). It refuses an entry that is sealed
  already or belongs to another chain, so a sealed entry is never overwritten.
- ``governance_open_erasure(...)``: as in 0024_a, but the erasure's entry is
  inserted unsealed, without the lock; the sealer chains it like any other.

Going back needs every entry sealed first (``sequence`` becomes NOT NULL).
"""

import importlib

import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models

SEALING = r"""
CREATE FUNCTION governance_audit_sealing() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT COALESCE(current_setting('memoryadmin.sealing_audit', true), '') = 'on'
       AND pg_has_role(current_user, (SELECT relowner FROM pg_class
                                      WHERE oid = 'public.governance_auditentry'::regclass), 'MEMBER')
$$;

CREATE FUNCTION governance_seal_audit_entries(p_project_id bigint, p_ids bigint[], p_hashes text[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    head_sequence bigint;
    head_hash text;
    sealed bigint;
BEGIN
    IF COALESCE(array_length(p_ids, 1), 0) <> COALESCE(array_length(p_hashes, 1), 0) THEN
        RAISE EXCEPTION 'Each entry to seal needs its hash' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The lock governance.services.audit.seal takes for each chain: one sealer at a time.
    PERFORM pg_advisory_xact_lock(8675309, COALESCE(p_project_id, 0)::integer);
    IF p_project_id IS NULL THEN
        SELECT sequence, entry_hash INTO head_sequence, head_hash FROM public.governance_auditentry
         WHERE project_id IS NULL AND sequence IS NOT NULL ORDER BY sequence DESC LIMIT 1;
    ELSE
        SELECT sequence, entry_hash INTO head_sequence, head_hash FROM public.governance_auditentry
         WHERE project_id = p_project_id AND sequence IS NOT NULL ORDER BY sequence DESC LIMIT 1;
    END IF;
    PERFORM set_config('memoryadmin.sealing_audit', 'on', true);
    UPDATE public.governance_auditentry AS e
       SET sequence = COALESCE(head_sequence, 0) + t.n,
           previous_hash = CASE WHEN t.n = 1 THEN COALESCE(head_hash, repeat('0', 64))
                                ELSE p_hashes[t.n - 1] END,
           entry_hash = t.hash
      FROM unnest(p_ids, p_hashes) WITH ORDINALITY AS t(id, hash, n)
     WHERE e.id = t.id AND e.sequence IS NULL AND e.project_id IS NOT DISTINCT FROM p_project_id;
    GET DIAGNOSTICS sealed = ROW_COUNT;
    PERFORM set_config('memoryadmin.sealing_audit', '', true);
    IF sealed <> COALESCE(array_length(p_ids, 1), 0) THEN
        RAISE EXCEPTION 'Only unsealed entries of this chain can be sealed; % of % were'
            , sealed, COALESCE(array_length(p_ids, 1), 0)
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN COALESCE(head_sequence, 0) + sealed;
END
$$;

DROP FUNCTION governance_open_erasure(bigint, bigint, text, integer, text, text, text, jsonb, text,
    timestamptz, text, text);

CREATE FUNCTION governance_open_erasure(
    p_project_id bigint,
    p_actor text,
    p_actor_user_id integer,
    p_object_type text,
    p_object_id text,
    p_reason text,
    p_data jsonb,
    p_request_id text,
    p_created_at timestamptz
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    entry_id bigint;
BEGIN
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'Erasure needs a reason' USING ERRCODE = 'check_violation';
    END IF;
    -- Unsealed, like every entry: the sealer gives it its place in the chain.
    INSERT INTO public.governance_auditentry (
        project_id, sequence, actor, actor_user_id, action, object_type, object_id, reason, data,
        request_id, created_at, previous_hash, entry_hash
    ) VALUES (
        p_project_id, NULL, p_actor, p_actor_user_id, 'erasure.opened', p_object_type, p_object_id,
        p_reason, p_data, COALESCE(p_request_id, ''), p_created_at, '', ''
    ) RETURNING id INTO entry_id;
    INSERT INTO public.governance_erasuregrant (transaction_id, audit_entry_id, created_at)
    VALUES (pg_current_xact_id()::text::bigint, entry_id, p_created_at);
    RETURN entry_id;
END
$$;
"""

_GUARDS = importlib.import_module("governance.migrations.0024_a_database_guards").GUARDS
UNSEALING = """
DROP FUNCTION governance_open_erasure(bigint, text, integer, text, text, text, jsonb, text, timestamptz);
DROP FUNCTION governance_seal_audit_entries(bigint, bigint[], text[]);
DROP FUNCTION governance_audit_sealing();
""" + _GUARDS[_GUARDS.index("CREATE FUNCTION governance_open_erasure(") :]


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0037_write_agent_derived_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # First: the new trigger's condition calls governance_audit_sealing().
        migrations.RunSQL(SEALING, UNSEALING),
        pgtrigger.migrations.RemoveTrigger(
            model_name="auditentry",
            name="audit_no_update",
        ),
        migrations.RemoveConstraint(
            model_name="auditentry",
            name="audit_sequence_unique",
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="entry_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="previous_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="sequence",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="auditentry",
            index=models.Index(
                condition=models.Q(("sequence__isnull", True)),
                fields=["project", "id"],
                name="audit_unsealed_idx",
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="auditentry",
            trigger=pgtrigger.compiler.Trigger(
                name="audit_no_update",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (NOT (OLD.sequence IS NULL AND OLD.previous_hash = '' AND OLD.entry_hash = '' AND NEW.sequence IS NOT NULL AND (NEW.id, NEW.project_id, NEW.actor, NEW.actor_user_id, NEW.action, NEW.object_type, NEW.object_id, NEW.reason, NEW.data, NEW.request_id, NEW.created_at) IS NOT DISTINCT FROM (OLD.id, OLD.project_id, OLD.actor, OLD.actor_user_id, OLD.action, OLD.object_type, OLD.object_id, OLD.reason, OLD.data, OLD.request_id, OLD.created_at) AND governance_audit_sealing()))",
                    declare="DECLARE _not_skipped BOOLEAN := governance_refuse_skipping(TG_NAME, TG_RELID);",
                    func="RAISE EXCEPTION 'pgtrigger: Cannot update rows from % table', TG_TABLE_NAME;",
                    hash="845593f8d0448735e8609abc4e01a2dcfbc528d7",
                    operation="UPDATE",
                    pgid="pgtrigger_audit_no_update_d7847",
                    table="governance_auditentry",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.AddConstraint(
            model_name="auditentry",
            constraint=models.UniqueConstraint(
                condition=models.Q(("sequence__isnull", False)),
                fields=("project", "sequence"),
                name="audit_sequence_unique",
                nulls_distinct=False,
            ),
        ),
    ]
