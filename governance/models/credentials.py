"""The bearer secrets: agent keys and people's personal access tokens."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from governance.models.history import tracked
from governance.models.projects import Agent


class Credential(models.Model):
    """A bearer secret stored as a SHA-256 digest; the prefix finds the row.

    Secrets are 32 random bytes, so a fast digest is enough: there is nothing
    to brute-force that a slow hash would protect.
    """

    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class KeyScope(models.TextChoices):
    """What an agent key may do; each API operation needs one (governance.api.base)."""

    READ = "read", "Read: retrieve context, read facts, memories, writes and retrievals"
    WRITE = "write", "Write: propose memory writes and end sessions"
    FORGET = "forget", "Forget: withdraw facts on the person's request"


def all_key_scopes() -> list[str]:
    return list(KeyScope.values)


@tracked(exclude=["last_used_at"])
class AgentKey(Credential):
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="keys")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    scopes = ArrayField(models.CharField(max_length=16, choices=KeyScope.choices), default=all_key_scopes)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scopes__contained_by=KeyScope.values), name="agent_key_scopes_known"
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent} key {self.prefix}"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


@tracked(exclude=["last_used_at"])
class PersonalAccessToken(Credential):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="access_tokens")
    # Set by services.credentials (ACCESS_TOKEN_DEFAULT_DAYS, capped at ACCESS_TOKEN_MAX_DAYS);
    # an expired token answers 401 like a revoked one.
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.user} token {self.prefix}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()
