"""``manage.py create_agent_key``: it prints a key that authenticates until it is revoked."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from governance.models import AgentKey


@pytest.mark.django_db
def test_create_agent_key_prints_a_key_that_authenticates_until_revoked():
    out, err = io.StringIO(), io.StringIO()
    call_command("create_agent_key", "acme", "support-bot", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert secret.startswith("mak_")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/writes/999999").status_code == 404  # authenticated, no such write
    from governance.context import actor_scope
    from governance.services import credentials

    with actor_scope("test"):
        credentials.revoke_agent_key(AgentKey.objects.get(), reason="test")
    assert client.get("/api/v1/writes/999999").status_code == 401
