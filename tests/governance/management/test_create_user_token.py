"""``manage.py create_user_token``: a user, their role in a project and a token (stored as a digest)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from governance.models import Membership, PersonalAccessToken


@pytest.mark.django_db
def test_create_user_token_creates_user_role_membership_and_token():
    out = io.StringIO()
    call_command(
        "create_user_token",
        "riley",
        "--role",
        "reviewer",
        "--project",
        "acme",
        stdout=out,
        stderr=io.StringIO(),
    )
    secret = out.getvalue().strip()
    assert secret.startswith("mpt_")
    token = PersonalAccessToken.objects.get()
    assert token.user.username == "riley"
    assert Membership.objects.get(user=token.user, project__slug="acme").role == "reviewer"
    assert token.digest != secret and secret not in token.digest
