"""GET /api/v1/admin/audit and /api/v1/admin/audit/export (docs/api.md, issue 6)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rest_framework.test import APIClient

from governance.context import actor_scope
from governance.models import AuditEntry, PersonalAccessToken
from governance.services import credentials
from tests.governance.review_helpers import propose
from tests.personas import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def activity(support_bot):
    writes = [
        propose(
            support_bot, f"Deploys to region {n}", source_type="user_statement", kind="profile", key="region"
        )
        for n in range(3)
    ]
    return {"writes": writes, "retrieval": support_bot.retrieve()["retrieval_id"]}


@pytest.fixture
def audra_api(auditor):
    return token_client(auditor)


def test_history_pages_with_keyset_cursors(audra_api, activity, project):
    expected = AuditEntry.objects.filter(project=project).count() + 1  # + the retrieval
    seen: list[tuple[str, int]] = []
    params: dict[str, object] = {"limit": 3}
    while True:
        response = audra_api.get("/api/v1/admin/audit", params)
        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"results", "next"}
        seen.extend((row["source"], row["id"]) for row in body["results"])
        if body["next"] is None:
            break
        params = {"limit": 3, "cursor": body["next"]}
    assert len(seen) == len(set(seen)) == expected
    assert ("retrieval", activity["retrieval"]) in seen
    assert seen[0] == ("retrieval", activity["retrieval"])  # newest first


def test_history_rows_carry_the_chain_fields_and_filters_apply(audra_api, activity):
    oldest, middle, _ = (w.fact_id for w in activity["writes"])
    body = audra_api.get("/api/v1/admin/audit", {"fact": middle, "action": "fact"}).json()

    # The middle fact replaced the oldest (recorded on the oldest) and was itself replaced.
    assert [(row["action"], row["object_id"]) for row in body["results"]] == [
        ("fact.superseded", str(middle)),
        ("fact.superseded", str(oldest)),
    ]
    row = body["results"][0]
    entry = AuditEntry.objects.get(pk=row["id"])
    assert row["entry_hash"] == entry.entry_hash and row["sequence"] == entry.sequence
    assert row["previous_hash"] == entry.previous_hash and row["project"] == "acme"


def test_history_is_scoped_to_the_token_users_projects(activity, outsider, outsider_bot):
    outsider_bot.retrieve()
    body = token_client(outsider).get("/api/v1/admin/audit", {"limit": 200}).json()
    assert body["results"]
    assert {row["project"] for row in body["results"]} == {"globex"}
    assert token_client(outsider).get("/api/v1/admin/audit", {"project": "acme"}).json()["results"] == []


def test_bad_input_is_a_400_in_the_error_shape(audra_api, activity):
    for params in (
        {"cursor": "nope"},
        {"limit": 0},
        {"fact": "x"},
        {"since": "2030-01-02", "until": "2030-01-01"},
    ):
        response = audra_api.get("/api/v1/admin/audit", params)
        assert response.status_code == 400, params
        assert response.json()["error"]["code"] == "invalid"


def test_export_jsonl_and_csv_are_streamed(audra_api, activity, project):
    jsonl = audra_api.get("/api/v1/admin/audit/export", {"format": "jsonl"})
    assert jsonl.status_code == 200
    assert jsonl["Content-Type"].startswith("application/jsonl")
    assert jsonl.streaming
    lines = [json.loads(line) for line in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert len(lines) == AuditEntry.objects.filter(project=project).count() + 1
    assert [row["created_at"] for row in lines] == sorted(row["created_at"] for row in lines)

    exported = audra_api.get("/api/v1/admin/audit/export", {"format": "csv", "action": "write.submitted"})
    assert exported["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [int(r["object_id"]) for r in table] == [w.pk for w in activity["writes"]]


def test_export_defaults_to_jsonl_and_rejects_unknown_formats(audra_api, activity):
    assert audra_api.get("/api/v1/admin/audit/export")["Content-Type"].startswith("application/jsonl")
    response = audra_api.get("/api/v1/admin/audit/export", {"format": "xml"})
    assert response.status_code == 400
    assert "format" in response.json()["error"]["fields"]


def test_missing_or_revoked_token_is_401(auditor, activity):
    assert APIClient().get("/api/v1/admin/audit").status_code == 401
    with actor_scope("test"):
        token, secret = credentials.create_access_token(auditor)
        credentials.revoke_access_token(token, reason="lost laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/admin/audit").status_code == 401
    assert client.get("/api/v1/admin/audit/export").status_code == 401
    assert PersonalAccessToken.objects.get(pk=token.pk).revoked_at is not None


def test_agent_keys_cannot_read_the_audit(support_bot, activity):
    assert support_bot.client.get("/api/v1/admin/audit").status_code == 401
