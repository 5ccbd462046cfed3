"""Retrieval events partitioned by month of ``created_at`` (issue 13; docs/performance.md).

- ``governance_retrievalevent`` becomes a table partitioned by RANGE
  (created_at): one partition per calendar month (UTC), named
  ``governance_retrievalevent_pYYYYMM``, and a default partition
  (``governance_retrievalevent_default``) so an insert in a month nobody made a
  partition for still succeeds. Its primary key becomes ``(id, created_at)``, as
  PostgreSQL requires; Django keeps ``id`` as the model's primary key (the
  model state does not change, except the three foreign keys below).
- The rebuild (``governance_rebuild_retrievalevent``, used in both directions
  and dropped afterwards) copies every index, check and foreign key constraint,
  trigger, row-level security policy and grant of the old table onto the new
  one by reading them from the catalogue, so nothing is left behind that an
  earlier migration made; rows are copied with their ids, and the id sequence
  goes on where it was.
- The three foreign keys that point at an event (feedback, and the writes and
  facts derived from a retrieval, R16) named ``id`` alone; PostgreSQL needs a
  foreign key to name the whole primary key ``(id, created_at)``. Instead of a
  second column on each referencing table (which every writer would have to
  fill, and which Django cannot express as one foreign key), the constraints
  are dropped (``db_constraint=False``) and a deferred constraint trigger on
  each referencing table refuses a reference to an event that does not exist,
  as the foreign key did. The other direction (an event removed while referenced)
  needs no check: events are append-only, their DELETE refused by their
  triggers, and the one removal (expiry of a whole month, below) clears
  the references in the same transaction.
- ``governance_create_retrieval_partition(month)``: SECURITY DEFINER, owned by
  the owner role, so the application's upkeep job can make next month's
  partition although the application role cannot create tables. A new
  partition gets the parent's statement-level TRUNCATE guard (PostgreSQL clones
  only row triggers to partitions), and no grants: the application reaches
  events only through the parent table, where row-level security applies.
  Rows that landed in the default partition for that month are moved into it.
- ``governance_retrieval_partition_summary(month)`` and
  ``governance_expire_retrieval_partition(month)``: SECURITY DEFINER, owned by
  the owner role, for the retention job (governance.services.retention). The
  first locks the month's partition against new rows and says, per project,
  what expiring it would remove; the second drops the partition only when the
  month is older than 183 days and every project it touches has a matching
  ``retrievals.expired`` audit entry (written by the caller in the same
  transaction), after removing the events' feedback and clearing the
  references of facts and writes derived from them. The application role
  cannot drop a partition any other way.
"""

import django.db.models.deletion
from django.db import migrations, models

PARTITION_FUNCTION = r"""
CREATE FUNCTION governance_create_retrieval_partition(p_month date) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    parent constant text := 'governance_retrievalevent';
    lower_bound timestamptz := date_trunc('month', p_month::timestamp) AT TIME ZONE 'UTC';
    upper_bound timestamptz := (date_trunc('month', p_month::timestamp) + interval '1 month') AT TIME ZONE 'UTC';
    partition text := parent || '_p' || to_char(p_month, 'YYYYMM');
    fallback constant text := 'governance_retrievalevent_default';
    stray boolean := false;
    guards text[];
    ignored text;
BEGIN
    IF to_regclass('public.' || partition) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF to_regclass('public.' || fallback) IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM public.%I WHERE created_at >= $1 AND created_at < $2)',
                       fallback) INTO stray USING lower_bound, upper_bound;
    END IF;
    IF stray THEN
        -- PostgreSQL refuses a new partition while the default one holds rows of
        -- its range: take the default out, move those rows, put it back.
        EXECUTE format('ALTER TABLE public.%I DETACH PARTITION public.%I', parent, fallback);
    END IF;
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I FOR VALUES FROM (%L) TO (%L)',
                   partition, parent, lower_bound, upper_bound);
    IF stray THEN
        -- The rows move, ids and all, so seals and checkpoints still hold. The
        -- append-only guard is skipped for this statement only, which its
        -- triggers allow the owner (governance_refuse_skipping); ALTER TABLE
        -- ... DISABLE TRIGGER would fail with the caller's deferred checks pending.
        SELECT array_agg(tgname::text) INTO guards FROM pg_trigger
         WHERE tgrelid = ('public.' || fallback)::regclass AND NOT tgisinternal AND (tgtype & 8) <> 0;
        ignored := current_setting('pgtrigger.ignore', true);
        PERFORM set_config('pgtrigger.ignore', '{' || COALESCE(array_to_string(guards, ','), '') || '}', true);
        EXECUTE format('WITH moved AS (DELETE FROM public.%I WHERE created_at >= $1 AND created_at < $2 '
                       'RETURNING *) INSERT INTO public.%I SELECT * FROM moved',
                       fallback, partition) USING lower_bound, upper_bound;
        PERFORM set_config('pgtrigger.ignore', COALESCE(ignored, ''), true);
        EXECUTE format('ALTER TABLE public.%I ATTACH PARTITION public.%I DEFAULT', parent, fallback);
    END IF;
    PERFORM governance_guard_retrieval_partition(partition);
    RETURN partition;
END
$$;

CREATE FUNCTION governance_guard_retrieval_partition(p_partition text) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    r record;
BEGIN
    -- Statement-level triggers (the TRUNCATE guard) are not cloned to partitions.
    FOR r IN
        SELECT tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger
         WHERE tgrelid = 'public.governance_retrievalevent'::regclass AND NOT tgisinternal
           AND (tgtype & 1) = 0
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger
                        WHERE tgrelid = ('public.' || p_partition)::regclass AND tgname = r.tgname) THEN
            EXECUTE replace(r.def, ' ON public.governance_retrievalevent ',
                            format(' ON public.%I ', p_partition));
        END IF;
    END LOOP;
    -- No grants on a partition: events are read and written through the
    -- parent, where row-level security applies (default privileges would
    -- otherwise let the application read a partition around it).
    FOR r IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = ('public.' || p_partition)::regclass AND a.grantee <> c.relowner
    LOOP
        IF r.grantee = 0 THEN
            EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC', p_partition);
        ELSE
            EXECUTE format('REVOKE ALL ON public.%I FROM %s', p_partition, r.grantee::regrole);
        END IF;
    END LOOP;
END
$$;
"""

DROP_PARTITION_FUNCTION = """
DROP FUNCTION governance_create_retrieval_partition(date);
DROP FUNCTION governance_guard_retrieval_partition(text);
"""

# One path for both directions: read what the table has from the catalogue,
# build the other form under the same name, copy the rows, put it all back.
REBUILD_FUNCTION = r"""
CREATE FUNCTION governance_rebuild_retrievalevent(p_partitioned boolean) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    t constant text := 'governance_retrievalevent';
    old constant text := 'governance_retrievalevent_unrebuilt';
    indexes text[] := ARRAY[]::text[];
    foreign_keys text[] := ARRAY[]::text[];
    triggers text[] := ARRAY[]::text[];
    policies text[] := ARRAY[]::text[];
    grants text[] := ARRAY[]::text[];
    sequence_grants text[] := ARRAY[]::text[];
    row_security boolean;
    last_id bigint;
    id_called boolean;
    new_sequence text;
    month date;
    statement text;
    r record;
BEGIN
    FOR r IN
        SELECT pg_get_indexdef(i.indexrelid) AS def FROM pg_index i
         WHERE i.indrelid = ('public.' || t)::regclass AND NOT i.indisprimary
    LOOP
        indexes := indexes || replace(r.def, ' ON ONLY public.', ' ON public.');
    END LOOP;
    FOR r IN
        SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
         WHERE conrelid = ('public.' || t)::regclass AND contype = 'f'
    LOOP
        foreign_keys := foreign_keys || format('ALTER TABLE public.%I ADD CONSTRAINT %I %s', t, r.conname, r.def);
    END LOOP;
    FOR r IN
        SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger
         WHERE tgrelid = ('public.' || t)::regclass AND NOT tgisinternal AND tgparentid = 0
    LOOP
        triggers := triggers || r.def;
    END LOOP;
    FOR r IN
        SELECT polname, polpermissive, polcmd,
               pg_get_expr(polqual, polrelid) AS qual, pg_get_expr(polwithcheck, polrelid) AS with_check,
               ARRAY(SELECT CASE WHEN role = 0 THEN 'PUBLIC' ELSE role::regrole::text END
                       FROM unnest(polroles) AS role) AS roles
          FROM pg_policy WHERE polrelid = ('public.' || t)::regclass
    LOOP
        policies := policies || (
            format('CREATE POLICY %I ON public.%I AS %s FOR %s TO %s', r.polname, t,
                   CASE WHEN r.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                   CASE r.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                                 WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                   array_to_string(r.roles, ', '))
            || COALESCE(' USING (' || r.qual || ')', '')
            || COALESCE(' WITH CHECK (' || r.with_check || ')', ''));
    END LOOP;
    FOR r IN
        SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = ('public.' || t)::regclass AND a.grantee <> c.relowner
    LOOP
        grants := grants || format('GRANT %s ON public.%I TO %s', r.privilege_type, t,
                                   CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE r.grantee::regrole::text END);
    END LOOP;
    FOR r IN
        SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = pg_get_serial_sequence('public.' || t, 'id')::regclass AND a.grantee <> c.relowner
    LOOP
        sequence_grants := sequence_grants || (
            format('GRANT %s ON SEQUENCE %%s TO %s', r.privilege_type,
                   CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE r.grantee::regrole::text END));
    END LOOP;
    SELECT relrowsecurity INTO row_security FROM pg_class WHERE oid = ('public.' || t)::regclass;
    EXECUTE format('SELECT last_value, is_called FROM %s', pg_get_serial_sequence('public.' || t, 'id'))
       INTO last_id, id_called;

    EXECUTE format('ALTER TABLE public.%I RENAME TO %I', t, old);
    EXECUTE format('CREATE TABLE public.%I (LIKE public.%I INCLUDING DEFAULTS INCLUDING IDENTITY '
                   'INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)%s',
                   t, old, CASE WHEN p_partitioned THEN ' PARTITION BY RANGE (created_at)' ELSE '' END);
    FOREACH statement IN ARRAY grants LOOP EXECUTE statement; END LOOP;
    FOREACH statement IN ARRAY triggers LOOP EXECUTE statement; END LOOP;
    IF row_security THEN
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    END IF;
    FOREACH statement IN ARRAY policies LOOP EXECUTE statement; END LOOP;
    IF p_partitioned THEN
        EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I DEFAULT', t || '_default', t);
        PERFORM governance_guard_retrieval_partition(t || '_default');
        -- A partition for every month that has events, and for this month and the next two.
        FOR month IN
            SELECT generate_series(
                LEAST(date_trunc('month', (SELECT min(created_at) FROM public.governance_retrievalevent_unrebuilt)
                                          AT TIME ZONE 'UTC'),
                      date_trunc('month', now() AT TIME ZONE 'UTC')),
                date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months',
                interval '1 month')::date
        LOOP
            PERFORM governance_create_retrieval_partition(month);
        END LOOP;
    END IF;
    EXECUTE format('INSERT INTO public.%I SELECT * FROM public.%I', t, old);
    EXECUTE format('DROP TABLE public.%I', old);

    EXECUTE format('ALTER TABLE public.%I ADD CONSTRAINT %I PRIMARY KEY (%s)', t, t || '_pkey',
                   CASE WHEN p_partitioned THEN 'id, created_at' ELSE 'id' END);
    FOREACH statement IN ARRAY indexes LOOP EXECUTE statement; END LOOP;
    FOREACH statement IN ARRAY foreign_keys LOOP EXECUTE statement; END LOOP;

    new_sequence := pg_get_serial_sequence('public.' || t, 'id');
    EXECUTE format('ALTER SEQUENCE %s RENAME TO %I', new_sequence, t || '_id_seq');
    new_sequence := format('public.%I', t || '_id_seq');
    PERFORM setval(new_sequence, last_id, id_called);
    FOREACH statement IN ARRAY sequence_grants LOOP EXECUTE format(statement, new_sequence); END LOOP;
END
$$;
"""

PARTITION = "SELECT governance_rebuild_retrievalevent(true);"
UNPARTITION = "SELECT governance_rebuild_retrievalevent(false);"
DROP_REBUILD_FUNCTION = "DROP FUNCTION governance_rebuild_retrievalevent(boolean);"

REFERENCE_CHECKS = r"""
CREATE FUNCTION governance_retrieval_reference_exists() RETURNS trigger
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- The referencing column is the trigger's argument: one function for three tables.
    event_id bigint := (to_jsonb(NEW) ->> TG_ARGV[0])::bigint;
BEGIN
    -- As the owner, past row-level security, as a foreign key check is.
    IF event_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM public.governance_retrievalevent WHERE id = event_id
    ) THEN
        RAISE EXCEPTION 'insert or update on table "%" violates foreign key: retrieval event % does not exist',
            TG_TABLE_NAME, event_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER governance_feedback_event_exists
    AFTER INSERT OR UPDATE OF event_id ON governance_retrievalfeedback
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION governance_retrieval_reference_exists('event_id');
CREATE CONSTRAINT TRIGGER governance_write_retrieval_exists
    AFTER INSERT OR UPDATE OF derived_from_retrieval_id ON governance_write
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION governance_retrieval_reference_exists('derived_from_retrieval_id');
CREATE CONSTRAINT TRIGGER governance_fact_retrieval_exists
    AFTER INSERT OR UPDATE OF derived_from_retrieval_id ON governance_fact
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION governance_retrieval_reference_exists('derived_from_retrieval_id');
"""

DROP_REFERENCE_CHECKS = """
DROP TRIGGER governance_feedback_event_exists ON governance_retrievalfeedback;
DROP TRIGGER governance_write_retrieval_exists ON governance_write;
DROP TRIGGER governance_fact_retrieval_exists ON governance_fact;
DROP FUNCTION governance_retrieval_reference_exists();
"""

EXPIRY_FUNCTIONS = r"""
CREATE FUNCTION governance_retrieval_partition_summary(p_month date)
RETURNS TABLE (
    project_id bigint, event_count bigint, first_id bigint, last_id bigint,
    feedback_count bigint, fact_count bigint, write_count bigint, counts_at_checkpoints jsonb
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    partition text := 'governance_retrievalevent_p' || to_char(p_month, 'YYYYMM');
BEGIN
    -- Rows of the month still in the default partition move into its own first.
    PERFORM governance_create_retrieval_partition(p_month);
    -- Nothing joins the month (or leaves it) until the caller's transaction ends,
    -- so what the audit entries say is what is dropped.
    EXECUTE format('LOCK TABLE public.%I IN SHARE MODE', partition);
    RETURN QUERY EXECUTE format($q$
        SELECT e.project_id, count(*), min(e.id), max(e.id),
               (SELECT count(*) FROM public.governance_retrievalfeedback f
                 JOIN public.%1$I x ON x.id = f.event_id WHERE x.project_id = e.project_id),
               (SELECT count(*) FROM public.governance_fact f
                 JOIN public.%1$I x ON x.id = f.derived_from_retrieval_id WHERE x.project_id = e.project_id),
               (SELECT count(*) FROM public.governance_write w
                 JOIN public.%1$I x ON x.id = w.derived_from_retrieval_id WHERE x.project_id = e.project_id),
               -- For each checkpoint whose range ends inside this month's ids: how
               -- many of the month's events it counted (verify_audit subtracts them).
               COALESCE((
                   SELECT jsonb_object_agg(c.through::text, (
                       SELECT count(*) FROM public.%1$I y
                        WHERE y.project_id = e.project_id AND y.id <= c.through))
                     FROM (SELECT DISTINCT k.retrievals_through AS through
                             FROM public.governance_auditcheckpoint k
                            WHERE k.project_id = e.project_id
                              AND k.retrievals_through >= min(e.id) AND k.retrievals_through < max(e.id)) c
               ), '{}'::jsonb)
          FROM public.%1$I e GROUP BY e.project_id ORDER BY e.project_id
    $q$, partition);
END
$$;

CREATE FUNCTION governance_expire_retrieval_partition(p_month date) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    partition text := 'governance_retrievalevent_p' || to_char(p_month, 'YYYYMM');
    month_label text := to_char(p_month, 'YYYY-MM');
    upper_bound timestamptz := (date_trunc('month', p_month::timestamp) + interval '1 month') AT TIME ZONE 'UTC';
    unrecorded bigint;
    dropped bigint;
    ignored text;
    guards text[];
BEGIN
    IF to_regclass('public.' || partition) IS NULL THEN
        RETURN 0;
    END IF;
    -- The floor the EU AI Act sets for deployers' logs (six months), whatever the caller asks.
    IF upper_bound > now() - interval '183 days' THEN
        RAISE EXCEPTION 'Retrieval events of % are not yet 183 days old; they are kept', month_label
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('LOCK TABLE public.%I IN SHARE MODE', partition);
    -- Every project in the month needs its audit entry, with the very numbers removed.
    EXECUTE format($q$
        SELECT count(*) FROM (
            SELECT e.project_id, count(*) AS n, min(e.id) AS first_id, max(e.id) AS last_id
              FROM public.%I e GROUP BY e.project_id
        ) s
         WHERE NOT EXISTS (
            SELECT 1 FROM public.governance_auditentry a
             WHERE a.project_id = s.project_id AND a.action = 'retrievals.expired'
               AND a.data ->> 'month' = $1
               AND (a.data ->> 'count')::bigint = s.n
               AND (a.data ->> 'first_id')::bigint = s.first_id
               AND (a.data ->> 'last_id')::bigint = s.last_id)
    $q$, partition) INTO unrecorded USING month_label;
    IF unrecorded > 0 THEN
        RAISE EXCEPTION 'Retrieval events of % are dropped only with a matching audit entry for each project '
            '(% without one)', month_label, unrecorded
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;

    -- Feedback is append-only too: its guard is skipped for this statement only,
    -- which its triggers allow the owner (governance_refuse_skipping).
    SELECT array_agg(tgname::text) INTO guards FROM pg_trigger
     WHERE tgrelid = 'public.governance_retrievalfeedback'::regclass AND NOT tgisinternal
       AND (tgtype & 8) <> 0;
    ignored := current_setting('pgtrigger.ignore', true);
    PERFORM set_config('pgtrigger.ignore', '{' || COALESCE(array_to_string(guards, ','), '') || '}', true);
    EXECUTE format('DELETE FROM public.governance_retrievalfeedback f USING public.%I e '
                   'WHERE f.event_id = e.id', partition);
    PERFORM set_config('pgtrigger.ignore', COALESCE(ignored, ''), true);
    -- A derived fact or write keeps its derived mark and authority cap (R16);
    -- only the pointer to the dropped event goes.
    EXECUTE format('UPDATE public.governance_fact f SET derived_from_retrieval_id = NULL FROM public.%I e '
                   'WHERE f.derived_from_retrieval_id = e.id', partition);
    EXECUTE format('UPDATE public.governance_write w SET derived_from_retrieval_id = NULL FROM public.%I e '
                   'WHERE w.derived_from_retrieval_id = e.id', partition);
    EXECUTE format('SELECT count(*) FROM public.%I', partition) INTO dropped;
    -- A table with deferred checks still queued (rows moved in from the default
    -- partition in this transaction) cannot be dropped: run them now, as the
    -- commit would; the rest of the transaction checks immediately.
    SET CONSTRAINTS ALL IMMEDIATE;
    EXECUTE format('DROP TABLE public.%I', partition);
    RETURN dropped;
END
$$;
"""

DROP_EXPIRY_FUNCTIONS = """
DROP FUNCTION governance_expire_retrieval_partition(date);
DROP FUNCTION governance_retrieval_partition_summary(date);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0033_review_keep_both"),
    ]

    operations = [
        # First, so the old table can go: these constraints name it.
        migrations.AlterField(
            model_name="fact",
            name="derived_from_retrieval",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="governance.retrievalevent",
            ),
        ),
        migrations.AlterField(
            model_name="write",
            name="derived_from_retrieval",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="governance.retrievalevent",
            ),
        ),
        migrations.AlterField(
            model_name="retrievalfeedback",
            name="event",
            field=models.OneToOneField(
                db_constraint=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="feedback",
                to="governance.retrievalevent",
            ),
        ),
        migrations.RunSQL(PARTITION_FUNCTION, DROP_PARTITION_FUNCTION),
        migrations.RunSQL(REBUILD_FUNCTION, DROP_REBUILD_FUNCTION),
        migrations.RunSQL(PARTITION, UNPARTITION),
        migrations.RunSQL(DROP_REBUILD_FUNCTION, REBUILD_FUNCTION),
        migrations.RunSQL(REFERENCE_CHECKS, DROP_REFERENCE_CHECKS),
        migrations.RunSQL(EXPIRY_FUNCTIONS, DROP_EXPIRY_FUNCTIONS),
    ]
