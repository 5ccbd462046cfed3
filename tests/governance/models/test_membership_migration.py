"""Migration 0008 copies each user's former group role onto their memberships."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("governance", "0006_retrieval_reasons_index"), ("auth", "0012_alter_user_first_name_max_length")]
AFTER = [("governance", "0008_membership_roles_from_groups")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("migrating_as_owner")
def test_group_roles_become_membership_roles():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    project_model = old.get_model("governance", "Project")
    user_model = old.get_model("auth", "User")
    group_model = old.get_model("auth", "Group")
    membership_model = old.get_model("governance", "Membership")
    acme = project_model.objects.create(slug="acme", name="ACME")
    globex = project_model.objects.create(slug="globex", name="Globex")
    riley = user_model.objects.create(username="riley")
    riley.groups.add(group_model.objects.get_or_create(name="reviewer")[0])
    both = user_model.objects.create(username="both")
    both.groups.add(group_model.objects.get_or_create(name="auditor")[0])
    both.groups.add(group_model.objects.get_or_create(name="admin")[0])
    root = user_model.objects.create(username="root", is_superuser=True)  # no group: no power any more
    for user in (riley, both, root):
        membership_model.objects.create(user=user, project=acme)
    membership_model.objects.create(user=riley, project=globex)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    roles = {
        (m.user.username, m.project.slug): m.role
        for m in new.get_model("governance", "Membership").objects.select_related("user", "project")
    }
    assert roles == {
        ("riley", "acme"): "reviewer",
        ("riley", "globex"): "reviewer",
        ("both", "acme"): "admin",
        ("root", "acme"): "auditor",
    }

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
