"""Login throttling for the console's login form (django-axes)."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lockout check, for logins that come with a request.

    Every login a person can attempt goes through the login view, with a
    request, and is throttled. Code that checks a password without a request
    (the test client's ``login()``, a shell) has no address to throttle by;
    axes would refuse it outright, so it is left to the next backend.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
