"""Per-credential rate limits: each agent key and each personal access token on its own.

Counters live in the Django cache (local memory by default, Redis in
production via CACHE_URL). A request over the limit is answered 429 with
Retry-After in the API's error shape (governance.api.errors).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from governance.models import AgentKey, PersonalAccessToken


class CredentialRateThrottle(SimpleRateThrottle):
    scope = "credential"

    def get_rate(self) -> str:
        # Read per request, not at import, so the setting can change without a
        # code path of its own (tests lower it).
        return f"{settings.API_RATE_PER_MINUTE}/min"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        credential = request.auth
        if isinstance(credential, AgentKey):
            return f"throttle:agent-key:{credential.pk}"
        if isinstance(credential, PersonalAccessToken):
            return f"throttle:access-token:{credential.pk}"
        # Unauthenticated requests get 401 (or are public schema and docs pages).
        return None
