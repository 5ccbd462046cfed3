"""Per-credential rate limits: each agent key and each personal access token on its own.

Counters live in the Django cache (local memory by default, Redis in
production via CACHE_URL). A request over the limit is answered 429 with
Retry-After in the API's error shape (governance.api.errors).

The last minute's requests are counted per whole second (``SecondCounts``):
at most 61 pairs whatever the limit. DRF's own throttle keeps the time of
every request, a list as long as the limit that goes to the cache and back
on every request; at the volumes a key may be allowed (300 writes a second
is 18,000 a minute) that was ~0.25-0.5 ms of a request's CPU and, with Redis,
~150 kB each way (issue 13). A request leaves the count at the start of the
second 60 seconds after its own, up to a second before DRF's would.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from governance.models import AgentKey, PersonalAccessToken

# [[second, requests in it], ...], oldest first: the window's requests as the cache keeps them.
SecondCounts = list[list[int]]


class CredentialRateThrottle(SimpleRateThrottle):
    scope = "credential"
    # Set by SimpleRateThrottle.__init__ from get_rate, which always gives a rate.
    num_requests: int
    duration: int
    history: SecondCounts
    counted: int  # the requests in ``history``

    def allow_request(self, request: Request, view: Any) -> bool:
        """DRF's check (at most the rate's number of requests in its period) over per-second counts."""
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        oldest = int(self.now) - self.duration  # this second and the period's others before it
        self.history = [pair for pair in self.cache.get(self.key, []) if pair[0] > oldest]
        self.counted = sum(count for _, count in self.history)
        if self.counted >= self.num_requests:
            return self.throttle_failure()
        return self.throttle_success()

    def throttle_success(self) -> bool:
        second = int(self.now)
        if self.history and self.history[-1][0] == second:
            self.history[-1][1] += 1
        else:
            self.history.append([second, 1])
        self.cache.set(self.key, self.history, self.duration)
        return True

    def wait(self) -> float:
        """Seconds until enough of the oldest seconds leave the window for one more request."""
        leaving = self.counted - self.num_requests + 1
        for second, count in self.history:
            leaving -= count
            if leaving <= 0:
                return max(second + self.duration - self.now, 0.001)
        return float(self.duration)

    def get_rate(self) -> str:
        # Read per request, not at import, so the setting can change without a
        # code path of its own (tests lower it).
        return f"{settings.API_RATE_PER_MINUTE}/min"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        # "per-second": DRF's list of times, under the names used before, is not
        # read as counts while an older process of a rolling deploy still writes it.
        credential = request.auth
        if isinstance(credential, AgentKey):
            return f"throttle:per-second:agent-key:{credential.pk}"
        if isinstance(credential, PersonalAccessToken):
            return f"throttle:per-second:access-token:{credential.pk}"
        # Unauthenticated requests get 401 (or are public schema and docs pages).
        return None
