"""Copy each user's former global role (a Django group) onto every membership they hold.

Data only, kept apart from the schema change (0007). A user in several role groups
gets the strongest one, as the old checks effectively did. Superusers are platform
operators now, not project admins, so ``is_superuser`` grants nothing here. The
groups themselves are left in place, unused, so this migration can be reversed.
"""

from django.db import migrations

# Strongest first: admin may do everything; reviewer and policy editor change
# state; auditor only reads.
STRENGTH = ("admin", "reviewer", "policy_editor", "auditor")


def roles_from_groups(apps, schema_editor):  # type: ignore[no-untyped-def]
    Membership = apps.get_model("governance", "Membership")
    User = apps.get_model("auth", "User")
    for user in User.objects.filter(memberships__isnull=False).distinct().prefetch_related("groups"):
        names = {group.name for group in user.groups.all()}
        role = next((name for name in STRENGTH if name in names), "auditor")
        Membership.objects.filter(user=user).update(role=role)


def groups_from_roles(apps, schema_editor):  # type: ignore[no-untyped-def]
    Membership = apps.get_model("governance", "Membership")
    Group = apps.get_model("auth", "Group")
    for membership in Membership.objects.select_related("user"):
        group, _ = Group.objects.get_or_create(name=membership.role)
        membership.user.groups.add(group)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_membership_role"),
        ("governance", "0006_retrieval_reasons_index"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]
    operations = [migrations.RunPython(roles_from_groups, groups_from_roles)]
