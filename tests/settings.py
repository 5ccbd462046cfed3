"""Settings for the test suite: production settings plus what tests need, set explicitly.

DEBUG stays off (pytest-django forces it anyway); the secrets are fixed test
values, never used outside tests; the live server for browser tests speaks
plain http, so cookies cannot require https there.
"""

from memoryadmin.settings import *  # noqa: F403

SECRET_KEY = "test-only-secret-key-not-for-any-deployment-0123456789abcdef"
TOMBSTONE_KEY = "test-only-tombstone-key-not-for-any-deployment-0123456789"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False
