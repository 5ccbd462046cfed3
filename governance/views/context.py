from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from governance import access
from governance.models.projects import Role


def _project_roles(request: HttpRequest) -> list[tuple[str, str]]:
    return [(slug, Role(role).label.lower()) for slug, role in access.project_roles(request.user)]


def console(request: HttpRequest) -> dict[str, Any]:
    """Navigation shows what the user may do in at least one project; every page and
    action still checks the role in the project of the object at hand."""
    roles = access.roles_of(request.user)
    return {
        "roles": roles,
        # Shown in the header: the role held in each project.
        "project_roles": SimpleLazyObject(lambda: _project_roles(request)),
        "can_review": access.can_anywhere(request.user, access.REVIEW_ROLES),
        "can_edit_policy": access.can_anywhere(request.user, access.POLICY_EDIT_ROLES),
        "is_auditor": Role.AUDITOR in roles,
        "htmx_debug_error_pages": settings.HTMX_DEBUG_ERROR_PAGES,
    }
