from django.db import migrations

ROLES = ("reviewer", "policy_editor", "auditor", "admin")


def create_role_groups(apps, schema_editor):  # type: ignore[no-untyped-def]
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    """Roles are groups (issue: console shell); data only, kept apart from schema."""

    dependencies = [("governance", "0002_domain_model"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
