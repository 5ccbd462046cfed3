"""Safe by default (issue 12 item 4): DEBUG only when asked, no start-up without secrets,
and ``check --deploy`` clean with the production settings the README documents."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from governance.management.commands.run_stack import local_stack_env
from memoryadmin import local_secrets

ROOT = Path(__file__).resolve().parents[2]
# What the README's production section sets (values are examples).
PRODUCTION = {
    "SECRET_KEY": "prod-example-5VwqgXQ2y0m7t1Zk9Jr3LhFbC8dNsAeUoPiYxW4vTgH6RjMn",
    "TOMBSTONE_KEY": "prod-example-tombstone-Qm4Lk8Vx2Zt6Bn0Hc5Rj9Wf3Dy7Gp1Su",
    "DATABASE_URL": "postgresql://memory_app:secret@db.internal:5432/memory",
    "DATABASE_OWNER_URL": "postgresql://memory_owner:other-secret@db.internal:5432/memory",
    "ALLOWED_HOSTS": "memory.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://memory.example.com",
    "BEHIND_TLS_PROXY": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "CACHE_URL": "redis://127.0.0.1:6379/1",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
}
# Whatever the developer's shell or the test run has set must not leak in.
SCRUBBED = {
    "DJANGO_SETTINGS_MODULE",
    "DEBUG",
    "SECURE_COOKIES",
    "SECURE_SSL_REDIRECT",
    "LOCAL_SECRETS_FILE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",  # set by tests/conftest.py for Playwright; never in production
    *PRODUCTION,
}


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "memoryadmin.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_settings():
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **PRODUCTION)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNINGS" not in result.stderr and "ERRORS" not in result.stderr


def test_one_database_url_warns_that_least_privilege_is_not_in_force():
    one_role = {k: v for k, v in PRODUCTION.items() if k != "DATABASE_OWNER_URL"}

    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **one_role)

    assert result.returncode != 0
    assert "memoryadmin.W001" in result.stderr
    assert "Least privilege is not in force" in result.stderr


def test_an_owner_url_for_another_database_stops_start_up():
    elsewhere = {**PRODUCTION, "DATABASE_OWNER_URL": "postgresql://memory_owner:x@db.internal:5432/other"}

    result = run(["manage.py", "check"], **elsewhere)

    assert result.returncode != 0
    assert "memoryadmin.E004" in result.stderr


def test_readme_documents_every_production_setting_the_test_uses():
    readme = (ROOT / "README.md").read_text()
    for name in PRODUCTION:
        assert name in readme, name


def test_without_secrets_and_debug_start_up_stops_with_a_plain_reason():
    result = run(["manage.py", "check"], DATABASE_URL=PRODUCTION["DATABASE_URL"])
    assert result.returncode != 0
    assert "(memoryadmin.E001) SECRET_KEY is not set." in result.stderr
    assert "(memoryadmin.E002) TOMBSTONE_KEY is not set." in result.stderr


def test_tombstone_key_no_longer_falls_back_to_the_secret_key():
    real_database = PRODUCTION["DATABASE_URL"]
    only_secret = run(["manage.py", "check"], SECRET_KEY=PRODUCTION["SECRET_KEY"], DATABASE_URL=real_database)
    assert only_secret.returncode != 0
    assert "E001" not in only_secret.stderr and "(memoryadmin.E002)" in only_secret.stderr
    same = run(
        ["manage.py", "check"], SECRET_KEY="k" * 60, TOMBSTONE_KEY="k" * 60, DATABASE_URL=real_database
    )
    assert same.returncode != 0 and "(memoryadmin.E003)" in same.stderr


def test_the_web_process_refuses_to_serve_without_secrets():
    result = run(["-c", "import memoryadmin.wsgi"], DATABASE_URL=PRODUCTION["DATABASE_URL"])
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr and "TOMBSTONE_KEY is not set" in result.stderr


def test_debug_is_on_only_when_asked_for(tmp_path):
    show = "from django.conf import settings; print(settings.DEBUG, settings.SESSION_COOKIE_SECURE)"
    assert run(["manage.py", "shell", "--no-imports", "-c", show], **PRODUCTION).stdout.split() == [
        "False",
        "True",
    ]
    secrets_file = tmp_path / "local-secrets.json"
    debug = run(
        ["manage.py", "shell", "--no-imports", "-c", show], DEBUG="1", LOCAL_SECRETS_FILE=str(secrets_file)
    )
    assert debug.stdout.split() == ["True", "False"], debug.stderr
    # DEBUG=1 without secrets uses the local ones, generated once for this checkout.
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600


def test_local_secrets_are_generated_once_and_readable_only_by_their_owner(tmp_path):
    path = tmp_path / ".data" / "local-secrets.json"
    first = local_secrets.load_or_create(path)
    assert set(first) == {"SECRET_KEY", "TOMBSTONE_KEY"}
    assert first["SECRET_KEY"] != first["TOMBSTONE_KEY"] and len(first["SECRET_KEY"]) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert local_secrets.load_or_create(path) == first


@pytest.mark.parametrize(
    ("env", "added"),
    [
        ({}, {"DEBUG": "1"}),
        ({"DEBUG": "0"}, {}),
        ({"DATABASE_URL": "postgresql://db/memory"}, {}),
    ],
)
def test_make_run_turns_debug_on_only_for_the_embedded_development_stack(env, added):
    assert local_stack_env(env) == added


def test_setup_commands_beside_make_run_share_its_local_secrets(tmp_path):
    """The README's setup commands work next to `make run` with no extra flag, on the embedded
    database only: they read (or create) the same local secrets, and DEBUG stays off."""
    secrets_file = tmp_path / "local-secrets.json"
    show = "from django.conf import settings; print(settings.DEBUG, settings.TOMBSTONE_KEY)"
    first = run(["manage.py", "shell", "--no-imports", "-c", show], LOCAL_SECRETS_FILE=str(secrets_file))
    assert first.returncode == 0, first.stderr
    debug, key = first.stdout.split()
    assert debug == "False"
    assert key == json.loads(secrets_file.read_text())["TOMBSTONE_KEY"]
    again = run(["manage.py", "shell", "--no-imports", "-c", show], LOCAL_SECRETS_FILE=str(secrets_file))
    assert again.stdout.split() == [debug, key]
