from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from governance import access
from governance.models import Project
from governance.models.projects import Role


def _project_roles(request: HttpRequest) -> list[tuple[str, str]]:
    held = access.memberships(request.user)
    slugs = dict(Project.objects.filter(pk__in=held).values_list("pk", "slug")) if held else {}
    return sorted((slugs[pid], Role(role).label.lower()) for pid, role in held.items() if pid in slugs)


def console(request: HttpRequest) -> dict[str, Any]:
    """Navigation shows what the user may do in at least one project; every page and
    action still checks the role in the project of the object at hand."""
    roles = access.roles_of(request.user)
    return {
        "roles": roles,
        # Shown in the header: the role held in each project (one query, only when rendered).
        "project_roles": SimpleLazyObject(lambda: _project_roles(request)),
        "can_review": access.can_anywhere(request.user, access.REVIEW_ROLES),
        "can_edit_policy": access.can_anywhere(request.user, access.POLICY_EDIT_ROLES),
        "is_auditor": Role.AUDITOR in roles,
    }
