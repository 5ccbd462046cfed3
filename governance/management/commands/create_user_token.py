"""``create_user_token USERNAME --role R --project P [--days N]``: grant the role, print a token once."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governance.context import actor_scope
from governance.models.projects import Role
from governance.services import agents, credentials, memberships


class Command(BaseCommand):
    help = (
        "Grant USERNAME the role in the project (user, project and membership created if missing, "
        "or the role changed) and print a new personal access token once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--project", required=True, help="Project slug")
        parser.add_argument("--name", default="", help="A label for the token")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help=(
                f"Days the token is valid (default {settings.ACCESS_TOKEN_DEFAULT_DAYS}, "
                f"at most {settings.ACCESS_TOKEN_MAX_DAYS}: longer is shortened)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1.")
        with actor_scope("command:create_user_token"), transaction.atomic():
            project = agents.ensure_project(options["project"])
            user_model = get_user_model()
            user, created = user_model.objects.get_or_create(username=options["username"])
            if created:
                # No password: a console login needs one set by an administrator.
                user.set_unusable_password()
                user.save()
            try:
                memberships.grant_role(project, user, options["role"], reason="create_user_token")
            except memberships.MembershipError as exc:
                raise CommandError(str(exc)) from exc
            token, secret = credentials.create_access_token(
                user, name=options["name"] or secrets.token_hex(2), days=days
            )
        self.stdout.write(secret)
        capped = " (shortened to the maximum)" if days and days > settings.ACCESS_TOKEN_MAX_DAYS else ""
        self.stderr.write(
            f"Token for {user.get_username()} ({options['role']} in {project.slug}), shown once; "
            f"valid until {token.expires_at:%Y-%m-%d %H:%M} UTC{capped}."
        )
