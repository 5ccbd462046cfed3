"""Reads for the credentials page: tokens a person may see and revoke, project members."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance import access
from governance.models import Membership, PersonalAccessToken


def manageable_tokens(user: Any) -> QuerySet[PersonalAccessToken]:
    """The user's own tokens, and those of the members of every project they administer."""
    admin_of = access.project_ids_with_role(user, access.ADMIN_ROLES)
    members = Membership.objects.filter(project_id__in=admin_of).values("user_id")
    return (
        PersonalAccessToken.objects.filter(Q(user_id=user.pk) | Q(user_id__in=members))
        .select_related("user")
        .defer("digest")
        .order_by("revoked_at", "-created_at")
    )


def members(project_ids: list[int]) -> QuerySet[Membership]:
    """The memberships of these projects, for their administrators to manage."""
    return (
        Membership.objects.filter(project_id__in=project_ids)
        .select_related("project", "user")
        .order_by("project__slug", "user__username")
    )
