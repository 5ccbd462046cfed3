"""Roles and project scoping for people (console and governance API).

Roles are Django groups (reviewer, policy_editor, auditor, admin); a user sees
only the projects they are a member of. Ids outside those projects answer
404, not 403, so their existence is not revealed (R1).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import QuerySet

from governance.models import Project
from governance.models.projects import Role

logger = logging.getLogger("governance.access")

REVIEW_ROLES = frozenset({Role.REVIEWER, Role.ADMIN})
POLICY_EDIT_ROLES = frozenset({Role.POLICY_EDITOR, Role.ADMIN})
READ_ROLES = frozenset({Role.REVIEWER, Role.POLICY_EDITOR, Role.AUDITOR, Role.ADMIN})

# Request users are AbstractBaseUser | AnonymousUser; the auth User model adds
# groups and is_superuser, which the stubs cannot see through the union.
UserLike = Any


def roles_of(user: UserLike) -> frozenset[str]:
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_governance_roles", None)
    if cached is not None:
        return cached
    names = set(user.groups.values_list("name", flat=True))
    if user.is_superuser:
        names.add(Role.ADMIN)
    roles = frozenset(name for name in names if name in Role.values)
    user._governance_roles = roles
    return roles


def has_any_role(user: UserLike, roles: frozenset[str]) -> bool:
    return bool(roles_of(user) & roles)


def projects_of(user: UserLike) -> QuerySet[Project]:
    if not getattr(user, "is_authenticated", False):
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def log_denied(user: UserLike, action: str, target: str) -> None:
    """Denied attempts are kept in the log for the auditors (issue: roles and scoping)."""
    logger.warning("denied user=%s action=%s target=%s", getattr(user, "username", "?"), action, target)
