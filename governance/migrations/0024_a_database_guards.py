"""What the application role cannot get around: erasure grants and skipped triggers.

- ``governance_erasuregrant``: a grant lets erasing UPDATEs of history through
  for one transaction. Only its owner (and so only the SECURITY DEFINER
  function below) may write it; a trigger refuses every other role.
- ``governance_open_erasure(...)``: SECURITY DEFINER, owned by the role that
  runs migrations. It saves the erasure's audit entry, only as the next link of
  its project's chain, and the grant for the current transaction. The entry's
  hash comes from the caller (governance.services.erasure); ``verify_audit``
  checks it like any other.
- ``governance_erasure_open()``: does the current transaction hold a grant?
  The append-only triggers ask it (migration 0024_b).
- ``governance_refuse_skipping(trigger, table)``: pgtrigger lets any session
  skip a trigger by naming it in the ``pgtrigger.ignore`` setting. The
  append-only triggers call this first, and it refuses the skip unless the
  session's role owns the table (which could disable the trigger anyway).
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

GUARDS = r"""
CREATE FUNCTION governance_refuse_skipping(trigger_name name, rel oid) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ignored text[] := NULLIF(current_setting('pgtrigger.ignore', true), '')::text[];
BEGIN
    IF trigger_name = ANY(ignored)
       AND NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = rel), 'MEMBER') THEN
        RAISE EXCEPTION 'Cannot skip % on %: its rows are append-only history', trigger_name, rel::regclass
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN true;
END
$$;

CREATE FUNCTION governance_erasuregrant_owner_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP <> 'INSERT'
       OR NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
        RAISE EXCEPTION 'Erasure is opened only through governance_open_erasure(), which records it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER governance_erasuregrant_owner_only
    BEFORE INSERT OR UPDATE OR DELETE ON governance_erasuregrant
    FOR EACH ROW EXECUTE FUNCTION governance_erasuregrant_owner_only();

CREATE FUNCTION governance_erasure_open() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.governance_erasuregrant
        WHERE transaction_id = pg_current_xact_id_if_assigned()::text::bigint
    )
$$;

CREATE FUNCTION governance_open_erasure(
    p_project_id bigint,
    p_sequence bigint,
    p_actor text,
    p_actor_user_id integer,
    p_object_type text,
    p_object_id text,
    p_reason text,
    p_data jsonb,
    p_request_id text,
    p_created_at timestamptz,
    p_previous_hash text,
    p_entry_hash text
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last_sequence bigint;
    last_hash text;
    entry_id bigint;
BEGIN
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'Erasure needs a reason' USING ERRCODE = 'check_violation';
    END IF;
    -- The lock governance.services.audit takes for each chain: one writer at a time.
    PERFORM pg_advisory_xact_lock(8675309, COALESCE(p_project_id, 0)::integer);
    SELECT sequence, entry_hash INTO last_sequence, last_hash
      FROM public.governance_auditentry
     WHERE project_id IS NOT DISTINCT FROM p_project_id
     ORDER BY sequence DESC LIMIT 1;
    IF p_sequence IS DISTINCT FROM COALESCE(last_sequence, 0) + 1
       OR p_previous_hash IS DISTINCT FROM COALESCE(last_hash, repeat('0', 64)) THEN
        RAISE EXCEPTION 'An erasure''s audit entry must be the next link of its project''s chain'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    INSERT INTO public.governance_auditentry (
        project_id, sequence, actor, actor_user_id, action, object_type, object_id, reason, data,
        request_id, created_at, previous_hash, entry_hash
    ) VALUES (
        p_project_id, p_sequence, p_actor, p_actor_user_id, 'erasure.opened', p_object_type, p_object_id,
        p_reason, p_data, COALESCE(p_request_id, ''), p_created_at, p_previous_hash, p_entry_hash
    ) RETURNING id INTO entry_id;
    INSERT INTO public.governance_erasuregrant (transaction_id, audit_entry_id, created_at)
    VALUES (pg_current_xact_id()::text::bigint, entry_id, p_created_at);
    RETURN entry_id;
END
$$;
"""

DROP_GUARDS = """
DROP FUNCTION governance_open_erasure(bigint, bigint, text, integer, text, text, text, jsonb, text,
    timestamptz, text, text);
DROP FUNCTION governance_erasure_open();
DROP TRIGGER governance_erasuregrant_owner_only ON governance_erasuregrant;
DROP FUNCTION governance_erasuregrant_owner_only();
DROP FUNCTION governance_refuse_skipping(name, oid);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0023_tombstone_value_digests"),
    ]

    operations = [
        migrations.CreateModel(
            name="ErasureGrant",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("transaction_id", models.BigIntegerField(db_index=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "audit_entry",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="governance.auditentry",
                    ),
                ),
            ],
        ),
        migrations.RunSQL(GUARDS, DROP_GUARDS),
    ]
