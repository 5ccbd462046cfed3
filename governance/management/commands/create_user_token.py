from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governance.context import actor_scope
from governance.models import Membership
from governance.models.projects import Role
from governance.services import agents, credentials


class Command(BaseCommand):
    help = (
        "Create a personal access token for USERNAME (user, role and project membership created if "
        "missing); prints the token once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--project", required=True, help="Project slug")
        parser.add_argument("--name", default="", help="A label for the token")

    def handle(self, *args: Any, **options: Any) -> None:
        with actor_scope("command:create_user_token"), transaction.atomic():
            project = agents.ensure_project(options["project"])
            user_model = get_user_model()
            user, created = user_model.objects.get_or_create(username=options["username"])
            if created:
                # No password: a console login needs one set by an administrator.
                user.set_unusable_password()
                user.save()
            try:
                group = Group.objects.get(name=options["role"])
            except Group.DoesNotExist as exc:
                raise CommandError("Role groups are missing: run `python manage.py migrate` first.") from exc
            user.groups.add(group)
            Membership.objects.get_or_create(user=user, project=project)
            _, secret = credentials.create_access_token(user, name=options["name"] or secrets.token_hex(2))
        self.stdout.write(secret)
        self.stderr.write(
            f"Token for {user.get_username()} ({options['role']} in {project.slug}), shown once."
        )
