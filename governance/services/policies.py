"""Policy changes: the draft, publishing it as an immutable version, rolling back.

Each function is the only door to its change (STYLE.md): it locks the agent
row so two editors cannot publish at once (the version numbers and
``agent.active_policy`` must move together), and writes its audit entry in
the same transaction (R15).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from governance import access
from governance.models import Agent, ChangeApproval, PolicyDraft, PolicyVersion, Project
from governance.rules.policy import PolicySettings, merge_and_validate
from governance.rules.policy_changes import (
    FieldChange,
    diff_settings,
    validate_source_caps,
    widening_cap_changes,
    widening_policy_changes,
)
from governance.services import audit


class PolicyError(Exception):
    """A policy change that cannot be made; ``field`` names the input to fix, if any."""

    field: str | None = None


class InvalidPolicy(PolicyError):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in errors.items()))


class ReasonRequired(PolicyError):
    field = "reason"

    def __init__(self) -> None:
        super().__init__("Give a reason: it goes into the version list and the audit trail.")


class NoDraft(PolicyError):
    def __init__(self) -> None:
        super().__init__("There is no draft to publish: save one first.")


class StaleDraft(PolicyError):
    """The active version moved since the draft was saved: publishing it would undo that change."""


class NothingToChange(PolicyError):
    """The result would equal the version already in force."""


class UnknownVersion(PolicyError):
    field = "version"


class NeedsAdmin(PolicyError):
    """The change lets more become memory without review: only a project administrator may make it."""

    def __init__(self, widening: list[str]) -> None:
        self.widening = widening
        super().__init__(
            "Only a project administrator may make this change, because it lets more become memory "
            "without a reviewer: " + " ".join(widening)
        )


class ApprovalError(PolicyError):
    """A second approval that cannot be given (not pending, same person, or not an administrator)."""


def _required_reason(reason: str | None) -> str:
    """Every policy change carries a reason: it goes into the version list and the audit trail."""
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired()
    return reason


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def _widening_allowed(project: Project, user: Any, widening: list[str]) -> None:
    """Least authority: widening changes need the project's admin; commands run as the operator."""
    if (
        widening
        and getattr(user, "pk", None) is not None
        and not access.has_role(user, project, access.ADMIN_ROLES)
    ):
        raise NeedsAdmin(widening)


def _needs_second_person(project: Project, user: Any, widening: list[str]) -> bool:
    return bool(widening) and project.require_second_approval and getattr(user, "pk", None) is not None


def _request_approval(
    project: Project,
    kind: str,
    payload: dict[str, Any],
    widening: list[str],
    reason: str,
    user: Any,
    *,
    agent: Agent | None = None,
    based_on: PolicyVersion | None = None,
) -> ChangeApproval:
    approval = ChangeApproval.objects.create(
        project=project,
        agent=agent,
        kind=kind,
        payload=payload,
        based_on=based_on,
        widening=widening,
        reason=reason,
        requested_by=user,
    )
    audit.record(
        project,
        "change.approval_requested",
        approval,
        reason=reason,
        actor_user=user,
        data={"kind": kind, "agent": agent.slug if agent else None, "widening": widening},
    )
    return approval


def _locked(agent: Agent) -> Agent:
    # The agent row is the lock for its policy: versions are numbered and
    # made active under it, so concurrent publishes and rollbacks serialise.
    # Nothing is joined into the locking query: after waiting for another
    # publisher, PostgreSQL re-reads the locked row but would read a joined
    # version from the old snapshot, missing the one just published. The
    # active version is loaded afterwards, by a query that sees it.
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    return Agent.objects.select_related("project", "active_policy").get(pk=locked.pk)


def _active(agent: Agent) -> PolicyVersion:
    assert agent.active_policy is not None, "every agent has an active policy version"
    return agent.active_policy


def _changes_data(changes: list[FieldChange]) -> dict[str, dict[str, Any]]:
    return {c.name: {"from": c.before, "to": c.after} for c in changes}


@transaction.atomic
def save_draft(agent: Agent, changes: Mapping[str, Any], *, user: Any = None) -> PolicyDraft:
    """Replace the agent's draft with the active version plus ``changes`` (any subset of fields).

    Invalid input raises ``InvalidPolicy`` with per-field messages and saves nothing.
    """
    agent = _locked(agent)
    active = _active(agent)
    settings, errors = merge_and_validate(active.policy, changes)
    if settings is None:
        raise InvalidPolicy(errors)
    draft, _ = PolicyDraft.objects.update_or_create(
        agent=agent,
        defaults={
            "settings": settings.to_dict(),
            "based_on": active,
            "updated_by": user if getattr(user, "pk", None) else None,
            "updated_at": timezone.now(),
        },
    )
    audit.record(
        agent.project,
        "policy.draft_saved",
        agent,
        data={
            "agent": agent.slug,
            "based_on": active.version,
            "changes": _changes_data(diff_settings(active.policy, settings)),
        },
        actor_user=user,
    )
    return draft


@transaction.atomic
def discard_draft(agent: Agent, *, user: Any = None) -> bool:
    """Drop the draft; False when there was none."""
    agent = _locked(agent)
    deleted, _ = PolicyDraft.objects.filter(agent=agent).delete()
    if deleted:
        audit.record(
            agent.project, "policy.draft_discarded", agent, data={"agent": agent.slug}, actor_user=user
        )
    return bool(deleted)


def _next_version(
    agent: Agent, settings: dict[str, Any], reason: str, user: Any, *, rolled_back_from: PolicyVersion | None
) -> PolicyVersion:
    # Under the agent lock, so max + 1 is not raced; the unique constraint is the backstop.
    latest = PolicyVersion.objects.filter(agent=agent).aggregate(m=Max("version"))["m"] or 0
    version = PolicyVersion.objects.create(
        agent=agent,
        version=latest + 1,
        settings=settings,
        reason=reason,
        created_by=user if getattr(user, "pk", None) else None,
        rolled_back_from=rolled_back_from,
    )
    agent.active_policy = version
    agent.save(update_fields=["active_policy"])
    return version


@transaction.atomic
def publish_draft(agent: Agent, reason: str, *, user: Any = None) -> PolicyVersion | ChangeApproval:
    """The draft becomes a new immutable version and the agent's active policy.

    The next retrieval reports the new version; retrievals already made keep
    the version they used (their events point at it, R14). A draft that lets
    more become memory without review needs a project administrator, and in a
    project that asks for two people it waits for a second administrator: the
    pending ``ChangeApproval`` is returned instead of a version.
    """
    reason = _required_reason(reason)
    agent = _locked(agent)
    active = _active(agent)
    draft = PolicyDraft.objects.filter(agent=agent).first()
    if draft is None:
        raise NoDraft()
    if draft.based_on_id != active.pk:
        based = draft.based_on.version if draft.based_on else "none"
        raise StaleDraft(
            f"The draft was made from version {based}, but version {active.version} is now active: "
            "save the draft again to build on the active version."
        )
    # Stored drafts were validated when saved; re-validating guards against a
    # draft saved under older rules reaching retrieval.
    settings, errors = merge_and_validate(PolicySettings(), draft.settings)
    if settings is None:
        raise InvalidPolicy(errors)
    changes = diff_settings(active.policy, settings)
    if not changes:
        raise NothingToChange(f"The draft equals version {active.version}, which is already active.")
    widening = widening_policy_changes(active.policy, settings)
    _widening_allowed(agent.project, user, widening)
    if _needs_second_person(agent.project, user, widening):
        return _request_approval(
            agent.project,
            ChangeApproval.POLICY,
            settings.to_dict(),
            widening,
            reason,
            user,
            agent=agent,
            based_on=active,
        )
    version = _next_version(agent, settings.to_dict(), reason, user, rolled_back_from=None)
    draft.delete()
    _record_version(
        "policy.published", agent, version, active, changes, reason, user, widening=widening, approved_by=None
    )
    return version


def _record_version(
    action: str,
    agent: Agent,
    version: PolicyVersion,
    previous: PolicyVersion,
    changes: list[FieldChange],
    reason: str,
    user: Any,
    **details: Any,
) -> None:
    """The entry of a new policy version (published, or rolled back to): which it replaced, what changed."""
    audit.record(
        agent.project,
        action,
        version,
        reason=reason,
        data={
            "agent": agent.slug,
            "version": version.version,
            "previous": previous.version,
            "changes": _changes_data(changes),
            **details,
        },
        actor_user=user,
    )


@transaction.atomic
def rollback(agent: Agent, to_version: int, reason: str, *, user: Any = None) -> PolicyVersion:
    """A new version equal to ``to_version``: history only grows, so a rollback is a publish."""
    reason = _required_reason(reason)
    agent = _locked(agent)
    active = _active(agent)
    target = PolicyVersion.objects.filter(agent=agent, version=to_version).first()
    if target is None:
        raise UnknownVersion(f"Version {to_version} does not exist for this agent.")
    changes = diff_settings(active.policy, target.policy)
    if not changes:
        raise NothingToChange(
            f"Version {to_version} equals version {active.version}, which is already active."
        )
    # A rollback is a publish: going back to a looser version widens like any other change.
    widening = widening_policy_changes(active.policy, target.policy)
    _widening_allowed(agent.project, user, widening)
    if _needs_second_person(agent.project, user, widening):
        raise ApprovalError(
            "This project asks a second administrator to approve changes like this one: publish it "
            "as a draft (copy the version into the draft) so it can be approved."
        )
    version = _next_version(agent, dict(target.settings), reason, user, rolled_back_from=target)
    _record_version(
        "policy.rolled_back", agent, version, active, changes, reason, user, rolled_back_to=target.version
    )
    return version


@transaction.atomic
def set_source_caps(
    project: Project, caps: Mapping[str, Any], reason: str, *, user: Any = None
) -> Project | ChangeApproval:
    """The project's maximum authority per source type (R4); future writes are capped by it.

    Raising a cap needs a project administrator, and a second one where the
    project asks for two people (the pending ``ChangeApproval`` is returned).
    """
    reason = _required_reason(reason)
    stored, errors = validate_source_caps(caps)
    if errors:
        raise InvalidPolicy(errors)
    # Locked so two editors' changes apply one after the other, each audited against what it replaced.
    project = Project.objects.select_for_update().get(pk=project.pk)
    previous = dict(project.source_caps or {})
    if previous == stored:
        raise NothingToChange("These caps are already in force.")
    widening = widening_cap_changes(previous, stored)
    _widening_allowed(project, user, widening)
    if _needs_second_person(project, user, widening):
        return _request_approval(project, ChangeApproval.SOURCE_CAPS, stored, widening, reason, user)
    return _apply_caps(project, stored, widening, reason, user)


def _apply_caps(
    project: Project,
    stored: dict[str, int],
    widening: list[str],
    reason: str,
    user: Any,
    *,
    approved_by: Any = None,
) -> Project:
    audit.change_field(
        project,
        "project.source_caps_changed",
        project,
        "source_caps",
        stored,
        reason=reason,
        actor_user=user,
        data={"widening": widening, "approved_by": _username(approved_by)},
    )
    return project


@transaction.atomic
def set_second_approval(project: Project, enabled: bool, reason: str, *, user: Any = None) -> Project:
    """Turn the project's "two people" rule for widening changes on or off (administrators only)."""
    reason = _required_reason(reason)
    _widening_allowed(project, user, ["Changes the rule that widening changes need two people."])
    project = Project.objects.select_for_update().get(pk=project.pk)
    if project.require_second_approval == enabled:
        raise NothingToChange("This is already the project's setting.")
    audit.change_field(
        project,
        "project.second_approval_changed",
        project,
        "require_second_approval",
        enabled,
        reason=reason,
        actor_user=user,
    )
    return project


@transaction.atomic
def decide_approval(approval_id: int, *, approve: bool, reason: str, user: Any) -> ChangeApproval:
    """A second administrator approves (and so applies) or rejects a waiting widening change."""
    reason = _required_reason(reason)
    # Locked: two administrators deciding at once cannot both apply it.
    approval = ChangeApproval.objects.select_for_update().get(pk=approval_id)
    project = Project.objects.select_for_update().get(pk=approval.project_id)
    if approval.status != "pending":
        raise ApprovalError(f"This change was already decided ({approval.get_status_display().lower()}).")
    if not access.has_role(user, project, access.ADMIN_ROLES):
        raise NeedsAdmin(list(approval.widening))
    if approve and approval.requested_by_id == user.pk:
        raise ApprovalError("A second administrator must approve this change, not the one who asked for it.")
    now = timezone.now()
    approval.decided_by = user
    approval.decided_at = now
    approval.decision_reason = reason
    if not approve:
        approval.status = "rejected"
    elif approval.kind == ChangeApproval.POLICY:
        approval.status = _apply_approved_policy(approval, user)
    else:
        _apply_caps(
            project,
            dict(approval.payload),
            list(approval.widening),
            approval.reason,
            approval.requested_by,
            approved_by=user,
        )
        approval.status = "approved"
    approval.save(update_fields=["status", "decided_by", "decided_at", "decision_reason"])
    audit.record(
        project,
        f"change.{approval.status}",
        approval,
        reason=reason,
        actor_user=user,
        data={"kind": approval.kind, "requested_by": approval.requested_by.get_username()},
    )
    return approval


def _apply_approved_policy(approval: ChangeApproval, user: Any) -> str:
    assert approval.agent is not None
    agent = _locked(approval.agent)
    active = _active(agent)
    if approval.based_on_id != active.pk:
        # Publishing it now would silently undo whatever was published since.
        return "stale"
    settings = PolicySettings.from_dict(approval.payload)
    version = _next_version(
        agent, settings.to_dict(), approval.reason, approval.requested_by, rolled_back_from=None
    )
    PolicyDraft.objects.filter(agent=agent, based_on=active).delete()
    _record_version(
        "policy.published",
        agent,
        version,
        active,
        diff_settings(active.policy, settings),
        approval.reason,
        approval.requested_by,
        widening=list(approval.widening),
        approved_by=_username(user),
    )
    return "approved"
