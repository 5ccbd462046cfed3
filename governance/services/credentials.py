"""Agent keys and personal access tokens: issue, authenticate, revoke.

The secret is shown once at creation; only its SHA-256 digest is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.models import Agent, AgentKey, PersonalAccessToken
from governance.models.credentials import Credential, KeyScope
from governance.selectors import credentials as credential_reads
from governance.services import audit

AGENT_KEY_PREFIX = "mak"
TOKEN_PREFIX = "mpt"
# last_used_at is for people deciding what to revoke; minute precision spares
# a write on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)

C = TypeVar("C", bound=Credential)


class TokenLifetimeError(ValueError):
    pass


def token_lifetime(days: int | None) -> timedelta:
    """The lifetime of a new token: the default unless asked, never beyond the maximum."""
    if days is None:
        days = settings.ACCESS_TOKEN_DEFAULT_DAYS
    if days < 1:
        raise TokenLifetimeError("A token lives at least one day.")
    return timedelta(days=min(days, settings.ACCESS_TOKEN_MAX_DAYS))


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _new_secret(kind: str) -> tuple[str, str]:
    prefix = secrets.token_hex(6)
    return prefix, f"{kind}_{prefix}_{secrets.token_urlsafe(32)}"


def _parse(secret: str, kind: str) -> str | None:
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != kind or not parts[1]:
        return None
    return parts[1]


def _authenticate(model: type[C], kind: str, secret: str, find: Callable[[str], C | None]) -> C | None:
    prefix = _parse(secret, kind)
    if prefix is None:
        return None
    credential = find(prefix)
    if credential is None or not credential.is_active:
        return None
    if not hmac.compare_digest(credential.digest, _digest(secret)):
        return None
    now = timezone.now()
    if credential.last_used_at is None or now - credential.last_used_at > LAST_USED_RESOLUTION:
        # Generic over the two concrete credential models; the abstract base has no manager.
        model._default_manager.filter(pk=credential.pk).update(last_used_at=now)
        credential.last_used_at = now
    return credential


class ScopeError(ValueError):
    pass


def key_scopes(scopes: Iterable[str] | None) -> list[str]:
    """The scopes of a new key in their canonical order: every scope unless narrowed."""
    if scopes is None:
        return list(KeyScope.values)
    chosen = set(scopes)
    unknown = sorted(chosen - set(KeyScope.values))
    if unknown:
        raise ScopeError(f"Unknown scope {', '.join(unknown)}: choose from {', '.join(KeyScope.values)}.")
    if not chosen:
        raise ScopeError("A key needs at least one scope.")
    return [scope for scope in KeyScope.values if scope in chosen]


@transaction.atomic
def create_agent_key(
    agent: Agent, *, name: str = "", created_by: Any = None, scopes: Iterable[str] | None = None
) -> tuple[AgentKey, str]:
    granted = key_scopes(scopes)
    prefix, secret = _new_secret(AGENT_KEY_PREFIX)
    key = AgentKey.objects.create(
        agent=agent, prefix=prefix, digest=_digest(secret), name=name, created_by=created_by, scopes=granted
    )
    audit.record(
        agent.project,
        "agent_key.created",
        key,
        data={"agent": agent.slug, "prefix": prefix, "scopes": granted},
    )
    return key, secret


def authenticate_agent_key(secret: str) -> AgentKey | None:
    # Every agent API request comes through here: the key, its agent, project and
    # active policy version in one statement built once (selectors.credentials).
    return _authenticate(AgentKey, AGENT_KEY_PREFIX, secret, credential_reads.agent_key)


@transaction.atomic
def revoke_agent_key(key: AgentKey, *, reason: str) -> AgentKey:
    key = AgentKey.objects.select_for_update().select_related("agent__project").get(pk=key.pk)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record(key.agent.project, "agent_key.revoked", key, reason=reason, data={"prefix": key.prefix})
    return key


def _owner_projects(user: Any) -> list[Any]:
    """Where a token event is recorded: every project of its owner (the operator's chain if none)."""
    return [m.project for m in user.memberships.select_related("project")] or [None]


@transaction.atomic
def create_access_token(
    user: Any, *, name: str = "", days: int | None = None
) -> tuple[PersonalAccessToken, str]:
    """A new token for ``user``, valid ``days`` (default and maximum from settings)."""
    prefix, secret = _new_secret(TOKEN_PREFIX)
    expires_at = timezone.now() + token_lifetime(days)
    token = PersonalAccessToken.objects.create(
        user=user, prefix=prefix, digest=_digest(secret), name=name, expires_at=expires_at
    )
    for project in _owner_projects(user):
        audit.record(
            project,
            "access_token.created",
            token,
            data={"user": user.get_username(), "prefix": prefix, "expires_at": expires_at.isoformat()},
        )
    return token, secret


def _access_token(prefix: str) -> PersonalAccessToken | None:
    return PersonalAccessToken.objects.select_related("user").filter(prefix=prefix).first()


def authenticate_access_token(secret: str) -> PersonalAccessToken | None:
    return _authenticate(PersonalAccessToken, TOKEN_PREFIX, secret, _access_token)


@transaction.atomic
def revoke_access_token(token: PersonalAccessToken, *, reason: str) -> PersonalAccessToken:
    token = PersonalAccessToken.objects.select_for_update().select_related("user").get(pk=token.pk)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        for project in _owner_projects(token.user):
            audit.record(
                project,
                "access_token.revoked",
                token,
                reason=reason,
                data={"user": token.user.get_username(), "prefix": token.prefix},
            )
    return token
