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
