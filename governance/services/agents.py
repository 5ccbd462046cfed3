"""Projects and agents: creation, retirement, archiving."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.text import slugify

from governance.models import Agent, PolicyVersion, Project
from governance.rules.policy import PolicySettings
from governance.services import audit


@transaction.atomic
def ensure_project(slug: str, *, name: str | None = None) -> Project:
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        project = Project.objects.create(slug=slugify(slug) or slug, name=name or slug)
        audit.record(project, "project.created", project, data={"slug": project.slug})
    return project


@transaction.atomic
def ensure_agent(
    project: Project, slug: str, *, name: str | None = None, policy: PolicySettings | None = None, user: Any = None
) -> Agent:
    """The agent with that slug; a new one starts on policy version 1 (DESIGN.md defaults)."""
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
