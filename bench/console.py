"""Console pages at volume (issues 13 and 16): each main page's answer time over 1 M retrieval events.

Not a test. Run it from the checkout::

    .venv/bin/python bench/console.py                    # 1 M retrieval events, about 20 minutes
    .venv/bin/python bench/console.py --events 100000    # a smaller run
    .venv/bin/python bench/console.py --facts 200000 --writes 60000   # a queue of many people

Like ``scale.py`` (whose seeding it reuses) it starts its own embedded
PostgreSQL in a temporary folder, migrates it, and loads the real tables:
30,000 facts for 10 projects, writes copied from them, and ``--events``
retrieval events with three candidates each for project 0's agent. It then
asks for each page as the role that uses it (a reviewer for the queue, an
auditor for the trail, a policy editor for the policy editor, an
administrator for the credentials page), through Django's test client in
process: the time from request to the full HTML answer, which is the server's
share of a page load (a browser adds its own rendering, about 100-200 ms for
these pages on this machine). It writes ``bench/out/console.json`` and prints a
table; figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import atexit
import html
import json
import random
import re
import shutil
import signal
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scale import OUT, _environment, as_superuser, make_chain, pct, seed, time_page


def pages(
    agent: Any, chain_fact: int, person: str, event_id: int, deep_cursor: str
) -> dict[str, tuple[str, str]]:
    """Each page by name: (its URL, the role that uses it)."""
    project, slug = agent.project.slug, agent.slug
    return {
        "home": ("/", "admin"),
        "review queue": ("/reviews/", "reviewer"),
        "facts list": ("/facts/", "auditor"),
        "fact with a 50-link chain": (f"/facts/{chain_fact}/", "reviewer"),
        "retrieval log": ("/retrievals/", "auditor"),
        "retrieval log, deep page": (f"/retrievals/?cursor={deep_cursor}", "auditor"),
        "one retrieval": (f"/retrievals/{event_id}/", "auditor"),
        "a person's retrievals": (f"/retrievals/principals/{project}/{person}/", "auditor"),
        "sessions list": ("/sessions/", "auditor"),
        "people": ("/people/", "auditor"),
        "search": ("/search/?q=city", "auditor"),
        "history": ("/history/", "auditor"),
        "history, retrievals": ("/history/?show=retrievals", "auditor"),
        "fact timeline": (f"/history/facts/{chain_fact}/", "auditor"),
        "agents": ("/agents/", "policy_editor"),
        "policy editor": (f"/agents/{project}/{slug}/", "policy_editor"),
        "seven questions": (f"/agents/{project}/{slug}/questions", "policy_editor"),
        "live metrics": (f"/quality/live/{project}/", "auditor"),
        "credentials": ("/credentials/", "admin"),
    }


def clients(project: Any) -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.test import Client

    from governance.models import Membership

    result = {}
    for role in ("reviewer", "auditor", "policy_editor", "admin"):
        user, _ = User.objects.get_or_create(username=f"bench-{role}")
        Membership.objects.get_or_create(user=user, project=project, defaults={"role": role})
        client = Client()
        client.force_login(user)
        result[role] = client
    return result


def measure(agent: Any, chain_fact: int, person: str, repeats: int) -> dict[str, Any]:
    from governance.models import RetrievalEvent
    from governance.selectors.cursors import encode_cursor

    events = RetrievalEvent.objects.filter(project=agent.project).order_by("-created_at", "-id")
    count = events.count()
    deep = events.values_list("created_at", "id")[int(count * 0.9)] if count > 10 else None
    newest = events.values_list("id", flat=True).first() or 0
    by_role = clients(agent.project)
    every = pages(agent, chain_fact, person, newest, encode_cursor(*deep) if deep else "")
    # The queue's similar facts come in a second request once the page is on
    # screen; timed as the page of its own that a browser without JavaScript gets.
    loader = re.search(r'data-similar-loader hx-get="([^"]+)"', by_role["reviewer"].get("/reviews/").text)
    if loader:
        every["review queue, similar facts"] = (html.unescape(loader.group(1)), "reviewer")
    result: dict[str, Any] = {}
    for name, (url, role) in every.items():
        client = by_role[role]
        client.get(url)  # the first answer warms caches the later ones share
        times = time_page(client, url, repeats)
        result[name] = {"url": url, "role": role, "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}
        print(
            f"  {name:28} {result[name]['p50_ms']:8.1f} {result[name]['p95_ms']:8.1f}  ({role})", flush=True
        )
    return {"events": count, "pages": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--facts", type=int, default=30_000)
    # Writes are copied from the first facts, person by person: 2,000 gives
    # the queue about 100 waiting writes of one person (the 8,107-fact one);
    # a fifth of --facts spreads them over many people, as make bench-full does.
    parser.add_argument("--writes", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(OUT / "console.json"))
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    folder = Path(tempfile.mkdtemp(prefix="memoryadmin-console-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    _environment(folder)

    import django

    django.setup()
    import logging

    logging.getLogger("axes").setLevel(logging.WARNING)
    logging.getLogger("django.request").setLevel(logging.ERROR)
    from django.core.management import call_command

    from governance.context import actor_scope

    call_command("migrate", verbosity=0)
    # Seeding copies past the row-history and append-only triggers, which only
    # the server's superuser may do; the pages are asked for as the application role.
    with as_superuser(), actor_scope("bench"):
        data = seed(args.facts, args.events, args.writes, random.Random(13))
    with actor_scope("bench"):
        agent = data["agent"]
        person = next(iter(data["buckets"].get("1-20") or data["buckets"]["21-100"]))
        chain = make_chain(agent, person, 50)
    print(
        f"pages over {args.events:,} retrieval events ({args.repeats} answers each): p50, p95 ms", flush=True
    )
    summary = measure(agent, chain, person, args.repeats)
    summary["console_p95_ms"] = pct([p["p95_ms"] for p in summary["pages"].values()], 100)
    summary["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"slowest page p95 {summary['console_p95_ms']:.1f} ms; written to {out}", flush=True)


if __name__ == "__main__":
    main()
