"""Bearer authentication: agent keys for the agent API, personal access tokens for people."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from governance import access, context, rls
from governance.api.errors import ScopeMissing
from governance.models import AgentKey, PersonalAccessToken
from governance.services import credentials


def _bearer(request: Request) -> str | None:
    header = authentication.get_authorization_header(request).decode(errors="replace")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return None
    return secret.strip()


class AgentPrincipal:
    """request.user for agent API calls: the agent behind a valid key."""

    is_authenticated = True

    def __init__(self, key: AgentKey) -> None:
        self.key = key
        self.agent = key.agent
        self.project = key.agent.project


class AgentKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AgentPrincipal, AgentKey] | None:
        secret = _bearer(request)
        if secret is None:
            return None
        key = credentials.authenticate_agent_key(secret)
        if key is None or key.agent.retired_at is not None or key.agent.project.archived_at is not None:
            raise exceptions.AuthenticationFailed("The agent key is not valid (unknown, revoked or retired).")
        context.set_actor(f"agent:{key.agent.slug}")
        rls.set_scope(rls.projects([key.agent.project_id]))
        return AgentPrincipal(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="agent"'


class AccessTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, PersonalAccessToken] | None:
        secret = _bearer(request)
        if secret is None:
            return None
        token = credentials.authenticate_access_token(secret)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed(
                "The access token is not valid (unknown, revoked or expired)."
            )
        context.set_actor(f"user:{token.user.get_username()}", user=token.user)
        rls.set_scope(rls.for_user(token.user))
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="governance"'


class IsAgent(permissions.BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, AgentPrincipal)


class HasKeyScope(permissions.BasePermission):
    """The key carries the scope the view declares for this method (``AgentAPIView.scopes``).

    A method the view declares no scope for is refused: a new endpoint cannot
    be reached by every key just because someone forgot to say what it needs.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        caller = request.user
        assert isinstance(caller, AgentPrincipal), "IsAgent runs first"
        method = "GET" if request.method == "HEAD" else request.method or ""
        needed = view.scopes.get(method)
        if needed is None:
            if method == "OPTIONS":
                return True
            raise exceptions.PermissionDenied(f"No agent key may use {method} here.")
        scope, action = needed
        if not caller.key.has_scope(scope):
            raise ScopeMissing(scope, action)
        return True


class HasRole(permissions.BasePermission):
    """A person with a membership somewhere; the view then checks the role in the project
    of the object at hand (``GovernanceAPIView.check``), or lists only the projects whose
    role allows it. A state-changing method needs the view to declare ``write_roles``."""

    message = "You are not a member of any project."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not getattr(user, "is_authenticated", False) or isinstance(user, AgentPrincipal):
            return False
        unsafe = request.method not in permissions.SAFE_METHODS
        if not access.memberships(user) or (unsafe and getattr(view, "write_roles", None) is None):
            access.log_denied(user, f"{request.method} {request.path}", view.__class__.__name__)
            return False
        return True


class AgentKeyScheme(OpenApiAuthenticationExtension):
    target_class = "governance.api.auth.AgentKeyAuthentication"
    name = "agentKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An agent API key (create_agent_key)."}


class AccessTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.api.auth.AccessTokenAuthentication"
    name = "personalAccessToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal access token (create_user_token).",
        }
