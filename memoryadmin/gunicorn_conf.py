"""The web tier's gunicorn settings: ``gunicorn -c python:memoryadmin.gunicorn_conf memoryadmin.wsgi``.

``make run`` (``run_stack.stack_commands``), the soak harness and the
benchmarks start gunicorn with this file, so what is measured is what ships.
A plain ``gunicorn memoryadmin.wsgi`` would run gunicorn's defaults: one
synchronous worker answering one request at a time, whose 30 s timeout kills
it in the middle of a long export, and a 2 s keep-alive that agents thinking
between calls race (docs/operations.md, "Load and faults").

Two settings come from the environment; a flag on gunicorn's command line
overrides anything here, as ever:

- ``WEB_CONCURRENCY``: processes (gunicorn's own variable, which it
  checks itself), default the number of cores. Each loads the embedding
  model on its first request: about 335 MB resident, 285 MB of it its own.
  Retrievals are CPU-bound, so more processes than cores buy nothing: on 2
  cores, 2 to 4 processes of 2 to 8 threads answered the same requests per
  second within the noise (docs/performance.md, "The web tier's settings").
- ``WEB_THREADS``: threads per process, default 4. They keep a process
  answering while one of its requests waits on the database, the embedding
  model or a long download.

Nothing here imports Django: gunicorn reads this file before it loads the application.
"""

from __future__ import annotations

import os


def _whole(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{name} must be a whole number of at least 1, not {raw!r}.")
    return int(raw)


workers = _whole("WEB_CONCURRENCY", os.cpu_count() or 1)
worker_class = "gthread"
threads = _whole("WEB_THREADS", 4)

# Loaded once in the master and forked: the workers share its pages, and
# memoryadmin/wsgi.py freezes what it loaded out of the collector's walks.
# Nothing opens a database connection or a thread while the application loads.
preload_app = True

# Longer than a load balancer's usual idle timeout (60 s), so the balancer,
# not gunicorn, closes an idle connection, and a request never goes out on one
# gunicorn is closing. An idle connection costs a gthread worker no thread.
keepalive = 75

# A worker that has not reported to the master for this long is restarted.
# Requests themselves run on the worker's threads and report nothing, so a
# long export or replay is not cut short by it.
timeout = 60
graceful_timeout = 30
