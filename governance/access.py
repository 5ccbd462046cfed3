"""Roles and project scoping for people (console and governance API): the one place.

A person's role is held per project (``Membership.role``); every check uses
the role in the project of the object at hand. ``admin`` may do everything in
its project. A Django superuser is the platform operator, not a project
member: being one grants no project role and shows no project's memory.

Order of checks, everywhere: resolve the object's project first; no membership
there answers 404 (its existence is not revealed, R1); a membership whose role
does not allow the action answers 403.

The user's memberships are read once per request (one query) and cached on
the user object, which lives as long as the request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from governance.models import Membership, Project
from governance.models.projects import Role

logger = logging.getLogger("governance.access")

REVIEW_ROLES = frozenset({Role.REVIEWER, Role.ADMIN})
POLICY_EDIT_ROLES = frozenset({Role.POLICY_EDITOR, Role.ADMIN})
READ_ROLES = frozenset({Role.REVIEWER, Role.POLICY_EDITOR, Role.AUDITOR, Role.ADMIN})
ADMIN_ROLES = frozenset({Role.ADMIN})
# Live quality metrics and the seven questions: the people who watch and tune what agents
# get (auditors, policy editors); reviewers work the queue and have their own figures there.
METRICS_ROLES = frozenset({Role.POLICY_EDITOR, Role.AUDITOR, Role.ADMIN})

DENIED_MESSAGE = "Your role in this project does not allow this."

# Request users are AbstractBaseUser | AnonymousUser; the auth User model adds
# memberships, which the stubs cannot see through the union.
UserLike = Any
ProjectRef = Project | int

_CACHE = "_governance_memberships"
_SLUGS = "_governance_membership_slugs"


def memberships(user: UserLike) -> dict[int, str]:
    """``{project_id: role}`` for the user, cached on the user object for the request."""
    if not getattr(user, "is_authenticated", False) or getattr(user, "pk", None) is None:
        return {}
    cached: dict[int, str] | None = getattr(user, _CACHE, None)
    if cached is None:
        rows = list(
            Membership.objects.filter(user_id=user.pk).values_list("project_id", "role", "project__slug")
        )
        cached = {pid: role for pid, role, _ in rows}
        setattr(user, _CACHE, cached)
        setattr(user, _SLUGS, {pid: slug for pid, _, slug in rows})
    return cached


def project_roles(user: UserLike) -> list[tuple[str, str]]:
    """``[(project slug, role)]`` sorted by slug, for showing; from the same cached query."""
    held = memberships(user)
    slugs: dict[int, str] = getattr(user, _SLUGS, {})
    return sorted((slugs[pid], role) for pid, role in held.items() if pid in slugs)


def forget(user: UserLike) -> None:
    """Drop the cached roles (after a membership change within the same request)."""
    for name in (_CACHE, _SLUGS):
        if hasattr(user, name):
            delattr(user, name)


def _project_id(project: ProjectRef) -> int:
    return project if isinstance(project, int) else project.pk


def allows(role: str | None, roles: Iterable[str]) -> bool:
    """Whether ``role`` may do what ``roles`` may: admin may do everything in its project."""
    return role is not None and (role == Role.ADMIN or role in roles)


def role_in(user: UserLike, project: ProjectRef) -> str | None:
    return memberships(user).get(_project_id(project))


def has_role(user: UserLike, project: ProjectRef, roles: Iterable[str]) -> bool:
    return allows(role_in(user, project), roles)


def require_role(user: UserLike, project: ProjectRef, roles: Iterable[str], *, action: str = "") -> str:
    """The user's role in ``project`` if it allows ``roles``; else 404 (not a member) or 403."""
    role = role_in(user, project)
    if role is None:
        raise Http404("No such object.")
    if not allows(role, roles):
        log_denied(user, action or "change", f"project={_project_id(project)} role={role}")
        raise PermissionDenied(DENIED_MESSAGE)
    return role


def project_ids_with_role(user: UserLike, roles: Iterable[str]) -> list[int]:
    wanted = frozenset(roles)
    return sorted(pid for pid, role in memberships(user).items() if allows(role, wanted))


def projects_with_role(user: UserLike, roles: Iterable[str]) -> QuerySet[Project]:
    """The projects where the user's role allows ``roles``: the scope of every listing."""
    ids = project_ids_with_role(user, roles)
    return Project.objects.filter(pk__in=ids) if ids else Project.objects.none()


def projects_of(user: UserLike) -> QuerySet[Project]:
    """Every project the user is a member of (every role may read its project)."""
    return projects_with_role(user, READ_ROLES)


def roles_of(user: UserLike) -> frozenset[str]:
    """The roles the user holds anywhere: for navigation only, never for a decision."""
    return frozenset(memberships(user).values())


def can_anywhere(user: UserLike, roles: Iterable[str]) -> bool:
    """Whether some project lets the user do this: to show or hide a menu entry or a form."""
    wanted = frozenset(roles)
    return any(allows(role, wanted) for role in memberships(user).values())


def require_anywhere(user: UserLike, roles: Iterable[str], *, action: str) -> None:
    """403 (logged) unless some project lets the user do this: for an action whose
    project is not known yet, or that spans projects."""
    if not can_anywhere(user, roles):
        log_denied(user, action, "")
        raise PermissionDenied(DENIED_MESSAGE)


def log_denied(user: UserLike, action: str, target: str) -> None:
    """Denied attempts are kept in the log for the auditors."""
    logger.warning("denied user=%s action=%s target=%s", getattr(user, "username", "?"), action, target)


def require_token_revoker(user: UserLike, token: Any) -> None:
    """Everyone may revoke their own tokens; a project admin any token of a member of their
    project. A token whose owner shares no project with the user is a 404; sharing one
    without being its admin is a 403."""
    if token.user_id == user.pk:
        return
    owner_projects = set(
        Membership.objects.filter(user_id=token.user_id).values_list("project_id", flat=True)
    )
    mine = memberships(user)
    shared = owner_projects & set(mine)
    if not shared:
        raise Http404("No such token.")
    if not any(allows(mine[pid], ADMIN_ROLES) for pid in shared):
        log_denied(user, "revoke token", f"token={token.pk}")
        raise PermissionDenied(DENIED_MESSAGE)
