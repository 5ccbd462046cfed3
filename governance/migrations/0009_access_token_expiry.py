"""Personal access tokens get an expiry.

Tokens issued before this migration had none: they get the default lifetime
(90 days) counted from the upgrade, so nobody is locked out the moment it runs
and no token lives forever. Schema only; the value is a column default used
once for existing rows (preserve_default=False).
"""

import datetime
import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models


def _existing_tokens_expire() -> datetime.datetime:
    return datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(days=90)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0008_membership_roles_from_groups"),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name="personalaccesstoken",
            name="insert_insert",
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="personalaccesstoken",
            name="update_update",
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="personalaccesstoken",
            name="delete_delete",
        ),
        migrations.AddField(
            model_name="personalaccesstoken",
            name="expires_at",
            field=models.DateTimeField(default=_existing_tokens_expire),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="personalaccesstokenevent",
            name="expires_at",
            field=models.DateTimeField(default=_existing_tokens_expire),
            preserve_default=False,
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="personalaccesstoken",
            trigger=pgtrigger.compiler.Trigger(
                name="insert_insert",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func='INSERT INTO "governance_personalaccesstokenevent" ("created_at", "digest", "expires_at", "id", "name", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "prefix", "revoked_at", "user_id") VALUES (NEW."created_at", NEW."digest", NEW."expires_at", NEW."id", NEW."name", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'insert\', NEW."id", NEW."prefix", NEW."revoked_at", NEW."user_id"); RETURN NULL;',
                    hash="82f8b74190467521a9e3ab9064f32cfff12907dd",
                    operation="INSERT",
                    pgid="pgtrigger_insert_insert_980b8",
                    table="governance_personalaccesstoken",
                    when="AFTER",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="personalaccesstoken",
            trigger=pgtrigger.compiler.Trigger(
                name="update_update",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (OLD."created_at" IS DISTINCT FROM (NEW."created_at") OR OLD."digest" IS DISTINCT FROM (NEW."digest") OR OLD."expires_at" IS DISTINCT FROM (NEW."expires_at") OR OLD."id" IS DISTINCT FROM (NEW."id") OR OLD."name" IS DISTINCT FROM (NEW."name") OR OLD."prefix" IS DISTINCT FROM (NEW."prefix") OR OLD."revoked_at" IS DISTINCT FROM (NEW."revoked_at") OR OLD."user_id" IS DISTINCT FROM (NEW."user_id"))',
                    func='INSERT INTO "governance_personalaccesstokenevent" ("created_at", "digest", "expires_at", "id", "name", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "prefix", "revoked_at", "user_id") VALUES (NEW."created_at", NEW."digest", NEW."expires_at", NEW."id", NEW."name", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'update\', NEW."id", NEW."prefix", NEW."revoked_at", NEW."user_id"); RETURN NULL;',
                    hash="13e3f3e9f36247d1ab79d16450ecb4a1a386a543",
                    operation="UPDATE",
                    pgid="pgtrigger_update_update_bd0be",
                    table="governance_personalaccesstoken",
                    when="AFTER",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="personalaccesstoken",
            trigger=pgtrigger.compiler.Trigger(
                name="delete_delete",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func='INSERT INTO "governance_personalaccesstokenevent" ("created_at", "digest", "expires_at", "id", "name", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "prefix", "revoked_at", "user_id") VALUES (OLD."created_at", OLD."digest", OLD."expires_at", OLD."id", OLD."name", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, NOW(), \'delete\', OLD."id", OLD."prefix", OLD."revoked_at", OLD."user_id"); RETURN NULL;',
                    hash="3fabd8b12b118ed041d30ca4331fe6276e04f554",
                    operation="DELETE",
                    pgid="pgtrigger_delete_delete_719e8",
                    table="governance_personalaccesstoken",
                    when="AFTER",
                ),
            ),
        ),
    ]
