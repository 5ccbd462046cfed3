"""Settings for the test suite: production settings plus what tests need, set explicitly.

DEBUG stays off (pytest-django forces it anyway); the secrets are fixed test
values, never used outside tests; the live server for browser tests speaks
plain http, so cookies cannot require https there.
"""

import os

from django.conf import global_settings

from memoryadmin.settings import *  # noqa: F403

SECRET_KEY = "test-only-secret-key-not-for-any-deployment-0123456789abcdef"
TOMBSTONE_KEY = "test-only-tombstone-key-not-for-any-deployment-0123456789"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False

# The production hasher (PBKDF2, a million rounds) costs about half a second per
# password on purpose; the suite creates and logs in hundreds of console users.
# MD5 first makes those hashes cheap; the production hashers stay listed, so a
# password hashed with them still verifies. Not a setting for anything but tests.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]

# Every test client is a new request handler, and each handler builds its
# middleware: WhiteNoise with finders then stats and describes every static
# file (about 60 ms per client on this machine, and personas make a client per
# request). Autorefresh looks a file up only when a /static/ URL is asked for,
# which the browser tests' live server still serves the same way.
WHITENOISE_AUTOREFRESH = True

# Under pytest-xdist (`make test`, docs/testing.md) each process has its own database and
# its own Celery worker, which inherits the process's PYTEST_XDIST_WORKER. The filesystem
# broker already has a folder per process (tests/conftest.py); on a Redis broker, which
# .ci/run shares between them, each process's keys get a prefix of their own, or one
# process's worker would take another's tasks and find none of their rows.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER and CELERY_BROKER_URL.startswith(("redis://", "rediss://", "sentinel://")):  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        "global_keyprefix": f"memtest-{_XDIST_WORKER}:",
    }
