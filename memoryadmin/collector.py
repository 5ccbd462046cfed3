"""Python's garbage collector in a long-lived process: the web processes, the Celery pool.

Two settings, made once the process has loaded what it keeps
(docs/performance.md, "The p95 is the garbage collector" and "The
collector's youngest generation"):

- ``gc.freeze()`` moves everything loaded so far (Django, the application,
  their imports: about half a million objects) out of the collector's reach,
  so a full collection no longer walks it.
- The youngest generation waits for ``YOUNG_OBJECTS`` new container objects
  instead of CPython's 700. A large principal's first retrieval keeps 5,000
  to 10,000 alive at once (its candidates, their scores and decisions): at
  700 it set off about twelve collections a round, one of them reaching
  the middle generation and, once in twelve rounds, one the oldest: 1.4 ms
  of the round in all. Such a round now sets off none of its own. What a
  collection is for, cyclic garbage, waits longer to be freed: at most
  this many objects' worth.

Nothing here imports Django.
"""

from __future__ import annotations

import gc

YOUNG_OBJECTS = 20_000


def settle() -> None:
    """Collect what is garbage already (frozen, it would never be freed), freeze the rest,
    and let the youngest generation grow to ``YOUNG_OBJECTS``."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, oldest)
