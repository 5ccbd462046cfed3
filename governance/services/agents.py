"""Projects and agents: creation, and the end of their scope (R8): retirement, archiving."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.text import slugify

from governance.context import current_actor
from governance.models import Agent, Fact, PolicyVersion, Project, Session
from governance.rules.policy import PolicySettings
from governance.rules.supersession import PERSON_ONLY_SOURCES, SOURCE_TYPES
from governance.services import audit, credentials
from governance.services.facts import end_scope
from governance.services.sessions import end_session_scope


@transaction.atomic
def ensure_project(slug: str, *, name: str | None = None) -> Project:
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        project = Project.objects.create(slug=slugify(slug) or slug, name=name or slug)
        audit.record(project, "project.created", project, data={"slug": project.slug})
    return project


@transaction.atomic
def ensure_agent(
    project: Project,
    slug: str,
    *,
    name: str | None = None,
    policy: PolicySettings | None = None,
    user: Any = None,
) -> Agent:
    """The agent with that slug; a new one starts on policy version 1 (the defaults in docs/api.md)."""
    agent = Agent.objects.filter(project=project, slug=slug).first()
    if agent is not None:
        return agent
    agent = Agent.objects.create(project=project, slug=slugify(slug) or slug, name=name or slug)
    version = PolicyVersion.objects.create(
        agent=agent,
        version=1,
        settings=(policy or PolicySettings()).to_dict(),
        reason="Initial policy for a new agent",
        created_by=user if getattr(user, "pk", None) else None,
    )
    agent.active_policy = version
    agent.save(update_fields=["active_policy"])
    audit.record(project, "agent.created", agent, data={"slug": agent.slug, "policy_version": 1})
    return agent


class SourceClaimError(Exception):
    """The source types asked for are not ones an agent can be allowed to claim."""


@transaction.atomic
def set_source_claims(
    agent: Agent,
    *,
    allowed: list[str] | None = None,
    is_config_source: bool | None = None,
    reason: str,
    user: Any = None,
) -> Agent:
    """Which source types ``agent``'s keys may claim (R3, R4); an administrator's decision, audited.

    ``allowed`` empty or None keeps "every type an agent may claim";
    ``reviewer`` can never be granted to an agent.
    """
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    before = {
        "allowed_source_types": list(agent.allowed_source_types),
        "is_config_source": agent.is_config_source,
    }
    if allowed is not None:
        unknown = sorted(set(allowed) - set(SOURCE_TYPES))
        if unknown:
            raise SourceClaimError(f"Unknown source types: {', '.join(unknown)}.")
        refused = sorted(set(allowed) & PERSON_ONLY_SOURCES)
        if refused:
            raise SourceClaimError(
                "Reviewer provenance comes only from a person in the console or governance API; "
                "it cannot be given to an agent."
            )
        agent.allowed_source_types = [s for s in SOURCE_TYPES if s in set(allowed)]
    if is_config_source is not None:
        agent.is_config_source = is_config_source
    after = {
        "allowed_source_types": list(agent.allowed_source_types),
        "is_config_source": agent.is_config_source,
    }
    if after != before:
        agent.save(update_fields=["allowed_source_types", "is_config_source"])
        audit.record(
            agent.project,
            "agent.sources_changed",
            agent,
            reason=reason,
            actor_user=user if getattr(user, "pk", None) else None,
            data={"before": before, "after": after},
        )
    return agent


class LifecycleError(Exception):
    """The ending cannot be applied as asked (no reason given)."""


@dataclass(frozen=True)
class ScopeEnded:
    facts_ended: int
    sessions_closed: int
    keys_revoked: int = 0


def _actor_label(user: Any) -> str:
    return f"user:{user.get_username()}" if getattr(user, "pk", None) else current_actor().label


def _close_open_sessions(
    sessions: QuerySet[Session], *, reason: str, actor_label: str, now: datetime
) -> tuple[int, int]:
    """Open sessions of an ended scope end too, with their slots (R8): (sessions closed, slots ended)."""
    closed = slots = 0
    for session in sessions.filter(ended_at__isnull=True).select_for_update().order_by("pk"):
        slots += end_session_scope(session, reason=reason, actor_label=actor_label)
        session.ended_at = now
        session.save(update_fields=["ended_at"])
        closed += 1
    return closed, slots


@transaction.atomic
def retire_agent(agent: Agent, *, reason: str, user: Any = None) -> ScopeEnded:
    """R8 end of scope for an agent: its sessions' slots end, its keys stop working.

    Facts the agent wrote about people or the project stay: they are the
    project's memory, read by its other agents, and they carry their own
    provenance. Slots are the agent's working memory and end with it.
    """
    reason = reason.strip()
    if not reason:
        raise LifecycleError("Retiring an agent needs a reason.")
    agent = Agent.objects.select_for_update().select_related("project").get(pk=agent.pk)
    if agent.retired_at is not None:
        return ScopeEnded(0, 0)
    now = timezone.now()
    actor = _actor_label(user)
    why = f"Agent {agent.slug} retired: {reason}"
    agent.retired_at = now
    agent.save(update_fields=["retired_at"])
    sessions = Session.objects.filter(agent=agent)
    closed, ended = _close_open_sessions(sessions, reason=why, actor_label=actor, now=now)
    # Slots of sessions that ended without passing through end_session.
    ended += end_scope(Fact.objects.filter(session__agent=agent, kind="slot"), reason=why, actor_label=actor)
    keys = list(agent.keys.filter(revoked_at__isnull=True).order_by("pk"))
    for key in keys:
        credentials.revoke_agent_key(key, reason=why)
    audit.record(
        agent.project,
        "agent.retired",
        agent,
        reason=reason,
        actor=actor,
        actor_user=user,
        data={"slots_ended": ended, "sessions_closed": closed, "keys_revoked": [k.prefix for k in keys]},
    )
    return ScopeEnded(ended, closed, len(keys))


@transaction.atomic
def archive_project(project: Project, *, reason: str, user: Any = None) -> ScopeEnded:
    """R8 end of scope for a project: every fact of it ends; its agents' keys stop authenticating
    (the API refuses keys of archived projects)."""
    reason = reason.strip()
    if not reason:
        raise LifecycleError("Archiving a project needs a reason.")
    project = Project.objects.select_for_update().get(pk=project.pk)
    if project.archived_at is not None:
        return ScopeEnded(0, 0)
    now = timezone.now()
    actor = _actor_label(user)
    why = f"Project {project.slug} archived: {reason}"
    project.archived_at = now
    project.save(update_fields=["archived_at"])
    closed, ended = _close_open_sessions(
        Session.objects.filter(project=project), reason=why, actor_label=actor, now=now
    )
    ended += end_scope(Fact.objects.filter(project=project), reason=why, actor_label=actor)
    audit.record(
        project,
        "project.archived",
        project,
        reason=reason,
        actor=actor,
        actor_user=user,
        data={"facts_ended": ended, "sessions_closed": closed},
    )
    return ScopeEnded(ended, closed)
