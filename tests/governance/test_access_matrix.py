"""Every URL pattern, console and API, against the access rules (issue 6 item 4).

The matrix is built from the URL resolver itself, so a new page or endpoint
is covered the day it is added: a URL whose parameters this module cannot
fill fails the test until someone says which object it takes.

- An auditor gets 403 on every state-changing request, and nothing changes.
- Roles are per project: a user who is admin in project A and only auditor
  in project B gets 403 on every state-changing request about B's objects
  (A's admin role counts for nothing there) and may still read them.
- A user of project A (with every role) gets 404 on project B's pages and
  ids; listings and exports show them nothing of project B.
- A revoked agent key or personal access token gets 401.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from governance.context import actor_scope
from governance.models import (
    AgentKey,
    AuditEntry,
    ChangeApproval,
    EvaluationRun,
    Fact,
    Job,
    Membership,
    PersonalAccessToken,
    Principal,
    RetrievalEvent,
    Session,
    Write,
)
from governance.rules import erasure as erasure_rules
from governance.services import credentials, feed, retrievals, writes
from tests.personas import grant, make_agent, make_user, token_client

pytestmark = pytest.mark.django_db

SKIPPED_PREFIXES = ("admin/", "login/", "logout/", "api/schema/", "api/docs/", "static/")
SECRET = "Project B's secret: the launch codename is BLUEBIRD"
# Pages of no project: memory-quality runs play made-up scenarios in projects
# of their own, so every member reads them (docs/quality.md).
PLATFORM_WIDE = frozenset({"quality:run"})
# State-changing routes open to every role in the project, auditors included: "verify chain"
# changes nothing but adds its job and the audit entry naming who asked (docs/console.md).
READ_ROLE_ACTIONS = frozenset({"audit:verify"})
# Reads that need a question in the query string to answer 200.
QUERIES = {
    "api-admin-why": "?principal=carol&phrase=Oslo",
    "quality:why": "?project=globex&principal=carol&phrase=Oslo",
}
# Listings asked for project B's words, so a leak would show in the body (issue 16 item 7).
LISTING_QUERIES = {
    "search:results": "?q=launch+codename+BLUEBIRD",
    "facts:index": "?q=BLUEBIRD",
    "people:directory": "?q=carol",
    "sessions:index": "",
}


@dataclass(frozen=True)
class Route:
    name: str
    params: tuple[str, ...]
    is_api: bool


def _walk(
    patterns: list[Any], prefix: str = "", namespace: str = ""
) -> Iterator[tuple[str, str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern) and entry.name:
            yield prefix + str(entry.pattern), namespace + entry.name, entry


def routes() -> list[Route]:
    found = []
    for route, name, pattern in _walk(get_resolver().url_patterns):
        if route.startswith(SKIPPED_PREFIXES) or route == "":
            continue
        # Our includes carry no parameters of their own, so the leaf's are all of them.
        params = tuple(getattr(pattern.pattern, "converters", {}))
        found.append(Route(name, params, route.startswith("api/")))
    return found


@pytest.fixture
def world(project, other_project):
    """Project A (acme) people; project B (globex) with one of everything."""
    a_admin = make_user("ada", "admin", project)
    b_auditor = make_user("bea", "auditor", other_project)
    b_reviewer = make_user("bob", "reviewer", other_project)
    # Admin in A, only auditor in B: A's role must not count for B's objects.
    mixed = make_user("max", "admin", project)
    grant(mixed, "auditor", other_project)
    b_bot = make_agent(other_project, "globex-bot")
    a_bot = make_agent(project, "acme-bot")
    with actor_scope("test"):
        write = writes.submit_write(
            b_bot.agent,
            writes.WriteRequest(
                principal="carol",
                kind="preference",
                key=None,
                statement=SECRET,
                source_type="chat_message",
                source_ref="slack:1",
                source_observed_at=timezone.now(),
                session="b-session",
            ),
        )
        active = writes.submit_write(
            b_bot.agent,
            writes.WriteRequest(
                principal="carol",
                kind="profile",
                key="city",
                statement="Carol lives in Oslo",
                source_type="user_statement",
                source_ref="chat:2",
                source_observed_at=timezone.now(),
            ),
        )
        event, _ = retrievals.retrieve(
            b_bot.agent,
            retrievals.RetrieveRequest(
                principal="carol", session="b-session", query="", round=1, identity_verified=True
            ),
        )
        job = Job.objects.create(
            kind="policy_replay", project=other_project, agent=b_bot.agent, created_by=b_reviewer
        )
        carol = Principal.objects.get(project=other_project, external_id="carol")
        erasure = Job.objects.create(
            kind="erasure",
            project=other_project,
            status="succeeded",
            params={"principal": carol.pk, "pseudonym": "erased-test"},
            result={
                "receipt": erasure_rules.receipt(
                    project=other_project.slug,
                    sequence=1,
                    entry_hash="0" * 64,
                    actor="user:bob",
                    reason="test",
                    recorded_at=timezone.now(),
                    data={"principal": "erased-test"},
                )
            },
        )
        token, _ = credentials.create_access_token(b_reviewer)
        webhook, _ = feed.create_endpoint(
            other_project, "https://siem.example/hook", event_types=[], description="", user=None
        )
        approval = ChangeApproval.objects.create(
            project=other_project,
            agent=b_bot.agent,
            kind=ChangeApproval.POLICY,
            payload={},
            widening=["Memory about a person is given out without verifying who is asking."],
            reason="test",
            requested_by=b_reviewer,
        )
    assert write.status == "pending_review" and active.status == "active"
    values = {
        "fact_id": active.fact_id,
        "write_id": write.pk,
        "event_id": event.pk,
        "retrieval_id": event.pk,
        "session_id": Session.objects.get(external_id="b-session").pk,
        "key_id": AgentKey.objects.get(agent=b_bot.agent).pk,
        "token_id": token.pk,
        "project": other_project.slug,
        "agent": b_bot.agent.slug,
        "version": 1,
        "job_id": job.pk,
        "verification_id": Job.objects.create(kind="verify_audit", project=other_project).pk,
        "external_id": "carol",
        "membership_id": Membership.objects.get(user=b_reviewer, project=other_project).pk,
        "approval_id": approval.pk,
        "agent_id": b_bot.agent.pk,
        "principal_id": carol.pk,
        "erasure_id": erasure.pk,
        "run_id": EvaluationRun.objects.create(origin="test").pk,
        "endpoint_id": webhook.pk,
    }
    return {
        "a_admin": a_admin,
        "b_auditor": b_auditor,
        "mixed": mixed,
        "b_bot": b_bot,
        "a_bot": a_bot,
        "values": values,
        "b_session_external": "b-session",
    }


def _url(route: Route, values: dict[str, Any], *, session_external: str) -> str:
    kwargs = {}
    for param in route.params:
        if param not in values:
            pytest.fail(f"{route.name} takes <{param}>: teach the access matrix which object it names")
        kwargs[param] = values[param]
        if route.is_api and param == "session_id":
            kwargs[param] = session_external  # the agent API names sessions by external id
    return reverse(route.name, kwargs=kwargs) + QUERIES.get(route.name, "")


def _state() -> tuple[object, ...]:
    return (
        AuditEntry.objects.count(),
        Fact.objects.filter(status="active").count(),
        Write.objects.filter(status="pending_review").count(),
        RetrievalEvent.objects.count(),
        PersonalAccessToken.objects.filter(revoked_at__isnull=True).count(),
        AgentKey.objects.filter(revoked_at__isnull=True).count(),
        tuple(Membership.objects.order_by("pk").values_list("pk", "role")),
        # A person forgotten by mistake would show here as a pseudonym.
        tuple(Principal.objects.order_by("pk").values_list("external_id", flat=True)),
    )


def test_the_matrix_covers_console_and_api():
    names = {route.name for route in routes()}
    assert {"reviews:queue", "facts:detail", "retrievals:log", "api-writes", "api-admin-reviews"} <= names


def test_an_auditor_gets_403_on_every_state_changing_request(client, world):
    auditor = world["b_auditor"]
    client.force_login(auditor)
    api = token_client(auditor)
    before = _state()
    checked = 0
    for route in routes():
        url = _url(route, world["values"], session_external=world["b_session_external"])
        if route.is_api:
            if not route.name.startswith("api-admin"):
                continue  # agent endpoints take agent keys, not people's tokens
            for method in ("post", "put", "patch", "delete"):
                status = getattr(api, method)(url, {}, format="json").status_code
                assert status in (403, 405), f"{method.upper()} {url} answered {status} to an auditor"
                checked += status == 403
        elif route.name not in READ_ROLE_ACTIONS:
            for method in ("post", "put", "delete"):
                status = getattr(client, method)(url, {}).status_code
                assert status in (403, 405), f"{method.upper()} {url} answered {status} to an auditor"
                checked += status == 403
    assert checked >= 10
    assert _state() == before


def test_an_admin_of_project_a_is_only_an_auditor_in_project_b(client, world):
    mixed = world["mixed"]
    client.force_login(mixed)
    api = token_client(mixed)
    before = _state()
    refused = read = 0
    for route in routes():
        if not route.params:
            continue
        url = _url(route, world["values"], session_external=world["b_session_external"])
        if route.is_api:
            if not route.name.startswith("api-admin"):
                continue
            get = api.get(url).status_code
            assert get in (200, 405), f"GET {url} answered {get} to an auditor of the project"
            for method in ("post", "put", "patch", "delete"):
                body = {"action": "approve", "reason": "x", "events": 1, "version": 1}
                status = getattr(api, method)(url, body, format="json").status_code
                assert status in (403, 405), f"{method.upper()} {url} answered {status}: admin elsewhere"
                refused += status == 403
        else:
            response = client.get(url)
            get = response.status_code
            if get == 302 and "/login/" not in response["Location"]:
                # A fragment's address (the policy editor's what-if) sends a plain GET on to
                # its page, which must open for this person.
                get = client.get(response["Location"]).status_code
            assert get in (200, 405), f"GET {url} answered {get} to an auditor of the project"
            read += get == 200
            for method in ("post", "put", "delete"):
                body = {"reason": "x", "action": "approve", "role": "admin", "grant-username": "max"}
                status = getattr(client, method)(url, body).status_code
                assert status in (403, 405), f"{method.upper()} {url} answered {status}: admin elsewhere"
                refused += status == 403
    assert refused >= 15 and read >= 5
    assert _state() == before


def test_a_user_of_project_a_gets_404_on_project_b(client, world):
    admin_a = world["a_admin"]
    client.force_login(admin_a)
    api = token_client(admin_a)
    for route in routes():
        if not route.params or route.name in PLATFORM_WIDE:
            continue
        url = _url(route, world["values"], session_external=world["b_session_external"])
        if route.is_api:
            if not route.name.startswith("api-admin"):
                continue
            status = api.get(url).status_code
            assert status in (404, 405), f"GET {url} answered {status} to a project-A user"
            post = api.post(url, {"action": "approve", "reason": "x", "events": 1}, format="json").status_code
            assert post in (404, 405), f"POST {url} answered {post} to a project-A user"
        else:
            status = client.get(url).status_code
            assert status in (404, 405), f"GET {url} answered {status} to a project-A user"
            post = client.post(url, {"reason": "x", "action": "approve"}).status_code
            assert post in (404, 405), f"POST {url} answered {post} to a project-A user"


def test_listings_and_exports_show_project_a_nothing_of_project_b(client, world):
    admin_a = world["a_admin"]
    client.force_login(admin_a)
    api = token_client(admin_a)
    for route in routes():
        if route.params:
            continue
        if route.is_api:
            if not route.name.startswith("api-admin"):
                continue
            response = api.get(reverse(route.name))
        else:
            response = client.get(reverse(route.name) + LISTING_QUERIES.get(route.name, ""))
        if response.status_code == 405:
            continue
        assert response.status_code == 200, f"{route.name}: {response.status_code}"
        # streaming_content exists only on a streamed response, which response.streaming tells.
        body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
        assert SECRET.encode() not in body, f"{route.name} shows project B's memory to project A"
        assert b"Carol lives in Oslo" not in body, f"{route.name} shows project B's memory to project A"


def test_agent_key_of_project_a_gets_404_on_project_b_ids(world):
    client = world["a_bot"].client
    values = world["values"]
    assert client.get(f"/api/v1/writes/{values['write_id']}").status_code == 404
    assert client.get(f"/api/v1/facts/{values['fact_id']}").status_code == 404
    assert client.get(f"/api/v1/retrievals/{values['event_id']}").status_code == 404
    assert client.get("/api/v1/principals/carol/memories").status_code == 404
    before = _state()
    assert (
        client.post(f"/api/v1/facts/{values['fact_id']}/withdraw", {"reason": "x"}, format="json").status_code
        == 404
    )
    assert _state() == before


def test_revoked_key_and_token_get_401(world):
    bot = world["b_bot"]
    reviewer = world["b_auditor"]
    api = token_client(reviewer)
    assert api.get("/api/v1/admin/reviews").status_code == 200
    assert bot.client.get(f"/api/v1/writes/{world['values']['write_id']}").status_code == 200
    with actor_scope("test"):
        credentials.revoke_agent_key(AgentKey.objects.get(agent=bot.agent), reason="leaked")
        for token in PersonalAccessToken.objects.filter(user=reviewer):
            credentials.revoke_access_token(token, reason="leaked")
    assert bot.client.get(f"/api/v1/writes/{world['values']['write_id']}").status_code == 401
    assert api.get("/api/v1/admin/reviews").status_code == 401
    assert api.post("/api/v1/admin/reviews/1/decision", {}, format="json").status_code == 401


def test_unknown_uuid_job_is_404_not_500(world):
    api = token_client(world["a_admin"])
    assert api.get(f"/api/v1/admin/jobs/{uuid.uuid4()}").status_code == 404
