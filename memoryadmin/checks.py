"""System checks that stop start-up when a production secret is missing.

Registered by ``governance.apps``; ``manage.py`` commands run them first, and
``wsgi.py``/``asgi.py`` run them before serving, so a web process without its
secrets refuses to start instead of signing sessions with a guessable key.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

SECRETS_TAG = "secrets"

HINTS = {
    "SECRET_KEY": "It signs sessions and CSRF tokens. Set the SECRET_KEY environment variable "
    '(e.g. python -c "import secrets; print(secrets.token_urlsafe(50))"), or DEBUG=1 for '
    "local development.",
    "TOMBSTONE_KEY": "It keys the digests that stop withdrawn memories from being learned again; "
    "it must differ from SECRET_KEY and never change. Set the TOMBSTONE_KEY environment variable, "
    "or DEBUG=1 for local development.",
}


def _configured(name: str) -> str:
    try:
        return str(getattr(settings, name, "") or "")
    except ImproperlyConfigured:  # Django refuses to hand out an empty SECRET_KEY
        return ""


@checks.register(SECRETS_TAG)
def required_secrets(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    if settings.DEBUG:
        return errors
    for index, name in enumerate(("SECRET_KEY", "TOMBSTONE_KEY"), start=1):
        if not _configured(name):
            errors.append(checks.Error(f"{name} is not set.", hint=HINTS[name], id=f"memoryadmin.E00{index}"))
    tombstone = _configured("TOMBSTONE_KEY")
    if tombstone and tombstone == _configured("SECRET_KEY"):
        errors.append(
            checks.Error(
                "TOMBSTONE_KEY is the same as SECRET_KEY.",
                hint="Give it its own value, so rotating SECRET_KEY leaves withdrawn memories blocked.",
                id="memoryadmin.E003",
            )
        )
    return errors


def require_secrets() -> None:
    """Raise (with the checks' own text) if the web process would run without its secrets."""
    errors = [message for message in required_secrets() if message.is_serious()]
    if errors:
        raise ImproperlyConfigured("\n".join(f"{e.msg} {e.hint}" for e in errors))


DATABASE_TAG = "database"


@checks.register(DATABASE_TAG)
def database_roles(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """One connection URL means one role: the application could alter or empty its own tables."""
    warnings: list[checks.CheckMessage] = []
    owner = getattr(settings, "DATABASE_OWNER", None)
    application = settings.DATABASES["default"]
    if not owner:
        warnings.append(
            checks.Warning(
                "Least privilege is not in force: the application connects to the database as the "
                "same role that runs migrations.",
                hint="Create an owner role and an application role (docs/operations.md, "
                '"Database roles"), then set DATABASE_OWNER_URL to the owner\'s URL and DATABASE_URL '
                "to the application's.",
                id="memoryadmin.W001",
            )
        )
    elif owner.get("USER") == application.get("USER"):
        warnings.append(
            checks.Warning(
                "Least privilege is not in force: DATABASE_OWNER_URL and DATABASE_URL name the same role.",
                hint='Give the application its own role (docs/operations.md, "Database roles").',
                id="memoryadmin.W002",
            )
        )
    owner_name = getattr(settings, "DATABASE_OWNER_NAME", None)
    if owner_name is not None and owner_name != application.get("NAME"):
        warnings.append(
            checks.Error(
                f"DATABASE_OWNER_URL names database {owner_name!r}, "
                f"DATABASE_URL {application.get('NAME')!r}.",
                hint="Both URLs must point at the same database; only the role differs.",
                id="memoryadmin.E004",
            )
        )
    return warnings
