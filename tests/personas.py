"""Named personas and factories shared by the suite (STYLE.md: a reviewer, a policy
editor, an auditor, an outsider from another project, an agent key)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import factory
import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from memoryadmin_client import Client as MemoryClient
from rest_framework.test import APIClient

from governance.context import actor_scope
from governance.models import Agent, Fact, Membership, Principal, Project, RetrievalEvent
from governance.rules.text import statement_fingerprint
from governance.services import agents, checkpoints, credentials
from governance.services.facts import statement_digest

PASSWORD = "correct horse battery staple"
WRITES_URL = "/api/v1/writes"
RETRIEVE_URL = "/api/v1/retrieve"


def write_body(
    statement: str,
    *,
    principal: str | None = "alice",
    kind: str = "profile",
    key: str | None = None,
    source: str | dict[str, Any] = "user_statement",
    ref: str = "chat:1",
    age: timedelta = timedelta(0),
    **extra: Any,
) -> dict[str, Any]:
    """The JSON of one agent write (POST /api/v1/writes, or one item of a batch).

    ``source`` is the source type, its ``ref`` and an observation ``age`` ago; a dict
    replaces the whole source object (for tests of malformed or exact sources).
    ``extra`` adds or replaces top-level fields (``session``, ``valid_to``...).
    """
    if not isinstance(source, dict):
        source = {"type": source, "ref": ref, "observed_at": (timezone.now() - age).isoformat()}
    return {
        "principal": principal,
        "kind": kind,
        "key": key,
        "statement": statement,
        "source": source,
        **extra,
    }


def retrieve_body(
    session: str | None = "s-1",
    *,
    principal: str | None = "alice",
    query: str = "",
    round: int = 1,
    identity_verified: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """The JSON of one retrieval (POST /api/v1/retrieve)."""
    return {
        "principal": principal,
        "session": session,
        "query": query,
        "round": round,
        "identity_verified": identity_verified,
        **extra,
    }


def wsgi_transport() -> httpx.WSGITransport:
    """An httpx transport into Django's WSGI handler, inside the test's transaction.

    Django closes the database connection at the start and end of each request;
    inside a test that would end the test's transaction, so (as Django's own test
    client does) those two signal handlers are off while the request runs.
    """
    from django.core import signals
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    handler = get_wsgi_application()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        signals.request_started.disconnect(close_old_connections)
        signals.request_finished.disconnect(close_old_connections)
        try:
            result = handler(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                result.close()
        finally:
            signals.request_started.connect(close_old_connections)
            signals.request_finished.connect(close_old_connections)

    return httpx.WSGITransport(app=app)


def memory_client(key: str, **options: Any) -> MemoryClient:
    """A ``memoryadmin_client.Client`` calling the real application in-process."""
    return MemoryClient("http://testserver", key, transport=wsgi_transport(), **options)


class ProjectFactory(factory.django.DjangoModelFactory[Project]):
    class Meta:
        model = Project
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"project-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())


class PrincipalFactory(factory.django.DjangoModelFactory[Principal]):
    class Meta:
        model = Principal
        django_get_or_create = ("project", "external_id")

    project = factory.SubFactory(ProjectFactory)
    external_id = factory.Sequence(lambda n: f"user-{n}")


class FactFactory(factory.django.DjangoModelFactory[Fact]):
    """A fact stored directly, for tests of reads; writes go through services."""

    class Meta:
        model = Fact

    project = factory.SubFactory(ProjectFactory)
    principal = None
    kind = "preference"
    key = None
    statement = factory.Sequence(lambda n: f"Remembered thing number {n}")
    source_type = "user_statement"
    source_ref = factory.Sequence(lambda n: f"chat:{n}")
    source_observed_at = factory.LazyFunction(lambda: timezone.now() - timedelta(days=1))
    writer = "agent:test"
    authority = 4
    confidence = "unverified"
    recorded_at = factory.LazyFunction(timezone.now)
    last_verified_at = factory.LazyAttribute(lambda o: o.source_observed_at)
    status = "active"
    statement_digest = factory.LazyAttribute(lambda o: statement_digest(o.statement))
    fingerprint = factory.LazyAttribute(
        lambda o: statement_fingerprint(o.statement, settings.TOMBSTONE_KEY.encode())
    )


def make_user(username: str, role: str | None, *projects: Project) -> User:
    """A console user holding ``role`` in each of ``projects`` (roles are per project).

    Stored directly, without an audit entry, so tests that count entries count only
    their own; the audited path is governance.services.memberships.
    """
    user = User.objects.create_user(username=username, password=PASSWORD)
    if role is None:
        return user  # a signed-up person who belongs to no project yet
    for project in projects:
        Membership.objects.create(user=user, project=project, role=role)
    return user


def grant(user: User, role: str, project: Project) -> None:
    """Give an existing persona a (different) role in another project."""
    Membership.objects.update_or_create(user=user, project=project, defaults={"role": role})


@dataclass
class AgentPersona:
    agent: Agent
    key: str

    @property
    def client(self) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.key}")
        return client

    @property
    def memory(self) -> MemoryClient:
        """The shipped Python client, calling the real application in-process (no network)."""
        return memory_client(self.key)

    def post_write(self, body: Any, **headers: Any) -> Any:
        """POST /api/v1/writes with ``body`` as it is (a write_body(), a batch, or garbage)."""
        return self.client.post(WRITES_URL, body, format="json", **headers)

    def post_retrieve(self, body: Any, **headers: Any) -> Any:
        """POST /api/v1/retrieve with ``body`` as it is."""
        return self.client.post(RETRIEVE_URL, body, format="json", **headers)

    def write(
        self, statement: str, *, expect: int = 201, status: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Write ``statement`` (fields as in write_body), check the answer's HTTP code and,
        when given, the write's ``status``; returns the answer's JSON."""
        response = self.post_write(write_body(statement, **fields))
        assert response.status_code == expect, response.content
        data: dict[str, Any] = response.json()
        if status is not None:
            assert data["status"] == status, data
        return data

    def retrieve(self, session: str | None = "s-1", *, expect: int = 200, **fields: Any) -> dict[str, Any]:
        """Retrieve for ``session`` (fields as in retrieve_body); returns the answer's JSON."""
        response = self.post_retrieve(retrieve_body(session, **fields))
        assert response.status_code == expect, response.content
        data: dict[str, Any] = response.json()
        return data


def make_agent(project: Project, slug: str, *, config_source: bool = False, **policy: Any) -> AgentPersona:
    """An agent with a key; ``config_source`` marks it as one that may write configuration."""
    from governance.rules.policy import PolicySettings

    with actor_scope("test"):
        agent = agents.ensure_agent(project, slug, policy=PolicySettings(**policy) if policy else None)
        if config_source:
            agent = agents.set_source_claims(agent, is_config_source=True, reason="test persona")
        _, secret = credentials.create_agent_key(agent)
    return AgentPersona(agent, secret)


def token_client(user: User) -> APIClient:
    with actor_scope("test"):
        _, secret = credentials.create_access_token(user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def project(db: Any) -> Project:
    with actor_scope("test"):
        return agents.ensure_project("acme", name="ACME Corp")


@pytest.fixture
def other_project(db: Any) -> Project:
    with actor_scope("test"):
        return agents.ensure_project("globex", name="Globex")


@pytest.fixture
def support_bot(project: Project) -> AgentPersona:
    return make_agent(project, "support-bot")


@pytest.fixture
def config_bot(project: Project) -> AgentPersona:
    """The agent that syncs the project's configuration (may write source type config)."""
    return make_agent(project, "config-sync", config_source=True)


@pytest.fixture
def outsider_bot(other_project: Project) -> AgentPersona:
    return make_agent(other_project, "globex-bot")


@pytest.fixture
def reviewer(project: Project) -> User:
    return make_user("riley", "reviewer", project)


@pytest.fixture
def second_reviewer(project: Project) -> User:
    return make_user("sam", "reviewer", project)


@pytest.fixture
def policy_editor(project: Project) -> User:
    return make_user("pat", "policy_editor", project)


@pytest.fixture
def auditor(project: Project) -> User:
    return make_user("audra", "auditor", project)


@pytest.fixture
def outsider(other_project: Project) -> User:
    """A reviewer, but of another project."""
    return make_user("olga", "reviewer", other_project)


def make_retrieval_event(agent: Agent, **fields: Any) -> RetrievalEvent:
    """A retrieval event stored directly, for tests of the log; real ones come from POST /retrieve."""
    values: dict[str, Any] = {
        "mode": "resume",
        "context": "",
        "tokens_used": 0,
        "token_budget": 600,
        "candidate_count": 0,
        "excluded_count": 0,
        "reasons": [],
        **fields,
    }
    assert agent.active_policy is not None, "every agent has an active policy version"
    values.setdefault("created_at", timezone.now())
    values.setdefault(
        "context_seal",
        checkpoints.seal_retrieval(
            agent.project_id,
            agent.pk,
            values["created_at"],
            values.get("query", ""),
            values["context"],
            values.get("candidate_data", []),
        ),
    )
    return RetrievalEvent.objects.create(
        project=agent.project, agent=agent, policy_version=agent.active_policy, **values
    )
