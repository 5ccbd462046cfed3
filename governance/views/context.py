from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from governance import access
from governance.models.projects import Role


def console(request: HttpRequest) -> dict[str, Any]:
    """Navigation depends on the user's roles."""
    roles = access.roles_of(request.user)
    return {
        "roles": roles,
        "can_review": bool(roles & access.REVIEW_ROLES),
        "can_edit_policy": bool(roles & access.POLICY_EDIT_ROLES),
        "is_auditor": Role.AUDITOR in roles,
    }
