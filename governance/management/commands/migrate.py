"""``manage.py migrate``, run as the database's owner role.

Django's own command, with one change: it connects as the owner role
(settings.DATABASE_OWNER) for its run, because only the owner may create
and alter tables, and the application role must not be able to.
"""

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate

from memoryadmin.database_roles import as_owner


class Command(DjangoMigrate):
    def handle(self, *args: Any, **options: Any) -> None:
        with as_owner(options["database"]):
            super().handle(*args, **options)
