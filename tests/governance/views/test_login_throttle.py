"""Login throttling (issue 12 item 4): five wrong passwords lock that username from that address."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.personas import PASSWORD

pytestmark = pytest.mark.django_db


def log_in(client: Client, username: str, password: str, address: str = "203.0.113.7"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_the_sixth_attempt_is_refused_even_with_the_right_password(reviewer):
    client = Client()
    for _ in range(4):
        wrong = log_in(client, reviewer.username, "not the password")
        assert wrong.status_code == 200
        assert "didn't match" in wrong.content.decode()
    # The fifth wrong password is the last: it already answers with the lockout.
    assert log_in(client, reviewer.username, "not the password").status_code == 429

    locked = log_in(client, reviewer.username, PASSWORD)

    assert locked.status_code == 429
    text = locked.content.decode()
    assert "Too many failed log-ins" in text and "Even the right password is refused" in text
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still sent to the login page


def test_the_lockout_holds_one_username_from_one_address_only(reviewer, auditor):
    for _ in range(5):
        log_in(Client(), reviewer.username, "not the password")
    # The same person from another address, and another person from this one, still get in.
    assert log_in(Client(), reviewer.username, PASSWORD, address="198.51.100.2").status_code == 302
    assert log_in(Client(), auditor.username, PASSWORD).status_code == 302


def test_a_right_password_before_the_limit_clears_the_count(reviewer):
    for _ in range(4):
        log_in(Client(), reviewer.username, "not the password")
    assert log_in(Client(), reviewer.username, PASSWORD).status_code == 302
    for _ in range(4):
        log_in(Client(), reviewer.username, "not the password")
    assert log_in(Client(), reviewer.username, PASSWORD).status_code == 302
