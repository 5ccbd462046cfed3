"""Per-credential rate limits: each agent key and each personal access token on its own.

Counters live in the Django cache (local memory by default, Redis in
production via CACHE_URL). A request over the limit is answered 429 with
Retry-After in the API's error shape (governance.api.errors).

The last minute's requests are counted per whole second: a request leaves the
count at the start of the second 60 seconds after its own, up to a second
before DRF's would. DRF's own throttle keeps the time of every request, a list
as long as the limit that goes to the cache and back on every request (at 300
writes a second, 18,000 times and ~0.25-0.5 ms of a request's CPU; issue 13).

A place in the minute is taken with the cache's atomic increment. DRF reads
the list, appends and writes it back, so requests of one key sent at the same
time each wrote over the others' counts: eight threads of one key were let
through 2.9 times its limit with the local cache and 4.6 times with Redis.
Now each request counts itself in its own second's counter (``INCR`` in
Redis, under the cache's lock locally) and reads back the total: those that
went past the limit take their count back and are refused. Seconds more than
one behind the clock are closed: the first request that sees one closed
folds its counter into the key's summary of the minute (``_minute``), so a
request reads three cache keys, not sixty. A request counts in the second it
read the clock in; one held up for more than a second between that and its
increment may find that second already folded, and goes uncounted (the limit
can then be passed by one such request).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from governance.models import AgentKey, PersonalAccessToken

# [[second, requests let through in it], ...], oldest first.
SecondCounts = list[list[int]]


class CredentialRateThrottle(SimpleRateThrottle):
    scope = "credential"
    # Set by SimpleRateThrottle.__init__ from get_rate, which always gives a rate.
    num_requests: int
    duration: int
    history: SecondCounts  # the minute's counts as this request found them, with its own
    counted: int  # the requests in ``history``

    def allow_request(self, request: Request, view: Any) -> bool:
        """DRF's check (at most the rate's number of requests in its period), counted per second."""
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        second = int(self.now)
        self.history = self._minute(second)
        self.counted = sum(count for _, count in self.history)
        if self.counted >= self.num_requests:
            return self.throttle_failure()
        # Take a place, then see whether it was still there: requests sent together
        # may all have read the count one short of the limit.
        if not (self.history and self.history[-1][0] == second):
            self.history.append([second, 0])
        this_second = self.history[-1]
        mine = self._second_key(second)
        taken = self._increment(mine)
        self.counted += taken - this_second[1]
        this_second[1] = taken
        if self.counted > self.num_requests:
            self.cache.decr(mine)
            this_second[1] -= 1
            self.counted -= 1
            return self.throttle_failure()
        return True

    def _second_key(self, second: int) -> str:
        return f"{self.key}:{second}"

    def _minute(self, second: int) -> SecondCounts:
        """The counts of the minute up to ``second``: the closed seconds' summary, folding in any
        closed since it was written, and the last two seconds' own counters."""
        live = (second - 1, second)
        found = self.cache.get_many([self.key, *(self._second_key(s) for s in live)])
        first = second - self.duration + 1  # the minute's oldest second
        # The summary: [the last second folded in, its minute's counts up to it]. Plain
        # lists, which any version of this code reads back from the cache.
        through, closed = found.get(self.key) or (first - 1, [])
        # Only what the minute holds before the live seconds (a clock set back
        # leaves later seconds out rather than counting them twice).
        seconds = [pair for pair in closed if first <= pair[0] < second - 1]
        unfolded = range(max(through + 1, first), second - 1)
        if unfolded:
            counts = self.cache.get_many([self._second_key(s) for s in unfolded])
            seconds += [[s, counts[key]] for s in unfolded if counts.get(key := self._second_key(s))]
            self.cache.set(self.key, [second - 2, seconds], self.duration)
        return seconds + [[s, found[key]] for s in live if found.get(key := self._second_key(s))]

    def _increment(self, key: str) -> int:
        """The second's count with this request in it (the cache adds atomically)."""
        try:
            return int(self.cache.incr(key))
        except ValueError:  # the second's first request
            # Kept a little past the minute, so that it is still there to be folded in
            # by the next request, however late in the minute that comes.
            if self.cache.add(key, 1, self.duration + 5):
                return 1
            return int(self.cache.incr(key))

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
        # Named apart from earlier versions' records (DRF's list of times, then one
        # list of per-second counts), so that during a rolling deploy neither is
        # read as this version's counts while an older process still writes it.
        credential = request.auth
        if isinstance(credential, AgentKey):
            return f"throttle:counted:agent-key:{credential.pk}"
        if isinstance(credential, PersonalAccessToken):
            return f"throttle:counted:access-token:{credential.pk}"
        # Unauthenticated requests get 401 (or are public schema and docs pages).
        return None
