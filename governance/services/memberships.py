"""Who holds which role in which project: grant, change and remove, each audited.

The only door to ``Membership`` rows (STYLE.md: one function per state
change). Every change writes an audit entry in the project's chain, in the
same transaction, naming the person, the role and the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from governance import access
from governance.models import Membership, Project
from governance.models.projects import Role
from governance.services import audit


class MembershipError(Exception):
    """A change that would leave the project in a state people cannot work with."""


@dataclass(frozen=True)
class RoleChange:
    membership: Membership
    previous_role: str | None  # None: the person was not a member before

    @property
    def changed(self) -> bool:
        return self.previous_role != self.membership.role


def _lock_admins(project: Project) -> list[int]:
    # Locking every admin row of the project serialises concurrent demotions, so two
    # admins cannot each remove the other and leave the project without one.
    return list(
        Membership.objects.select_for_update()
        .filter(project=project, role=Role.ADMIN)
        .values_list("user_id", flat=True)
    )


def _keep_an_admin(project: Project, losing_user_id: int) -> None:
    admins = _lock_admins(project)
    if admins == [losing_user_id]:
        raise MembershipError(
            f"{project.slug} needs at least one administrator: make someone else an administrator first."
        )


@transaction.atomic
def grant_role(project: Project, user: Any, role: str, *, reason: str = "") -> RoleChange:
    """Make ``user`` a member of ``project`` with ``role``, or change their role there."""
    if role not in Role.values:
        raise MembershipError(f"Unknown role {role!r}.")
    membership = Membership.objects.select_for_update().filter(project=project, user=user).first()
    if membership is None:
        membership = Membership.objects.create(project=project, user=user, role=role)
        audit.record(
            project,
            "membership.granted",
            membership,
            reason=reason,
            data={"user": user.get_username(), "role": role, "project": project.slug},
        )
        access.forget(user)
        return RoleChange(membership, None)
    previous = membership.role
    if previous != role:
        if previous == Role.ADMIN:
            _keep_an_admin(project, user.pk)
        membership.role = role
        membership.save(update_fields=["role"])
        audit.record(
            project,
            "membership.role_changed",
            membership,
            reason=reason,
            data={
                "user": user.get_username(),
                "role": role,
                "previous_role": previous,
                "project": project.slug,
            },
        )
        access.forget(user)
    return RoleChange(membership, previous)


@transaction.atomic
def revoke_membership(membership: Membership, *, reason: str = "") -> None:
    """Remove a person from a project: they lose every role there at once."""
    membership = (
        Membership.objects.select_for_update().select_related("project", "user").get(pk=membership.pk)
    )
    project, user = membership.project, membership.user
    if membership.role == Role.ADMIN:
        _keep_an_admin(project, user.pk)
    audit.record(
        project,
        "membership.revoked",
        membership,
        reason=reason,
        data={"user": user.get_username(), "role": membership.role, "project": project.slug},
    )
    membership.delete()
    access.forget(user)
