"""Benchmark of forgetting a person (issue 18): erase a principal with N facts and everything around them.

Not a test. Run it from the checkout::

    MEMORYADMIN_PGDATA=/tmp/bench-pg MEMORYADMIN_PGDATA_CLEANUP=delete DEBUG=1 \
        .venv/bin/python bench/erasure.py                 # 5,000 facts
    ... bench/erasure.py --facts 20000 --events 1000      # bigger

It creates a throwaway database ``test_memoryadmin_bench_erasure`` with Django's test-database
machinery on the configured server, then stores, for one person: N facts over every kind and
status (each with a 384-dimension vector and a write carrying findings and a stored reply; one in
ten with a review decision whose note quotes it), sessions with resume hints and cached blocks,
and retrieval events whose sealed context quotes the facts they selected. Another person gets a
tenth as much, to show the erasure stays within its person. Rows go in with ``bulk_create``, so the
history triggers fire as in production.

With ``--demo`` it loads the demo instead (``manage.py load_demo``) and forgets the demo person
with the most records, printing the dry run and the receipt.

It then times the dry run, and the erasure as the worker runs it (``services.erasure.run``: batches
of 500 facts, then the writes, then the rest and the receipt), checks the receipt against the audit
chain, checks every seal and the chain, and prints the receipt's counts.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")

import django  # noqa: E402 (settings must be configured first)

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402
from django.utils import timezone  # noqa: E402

from governance.context import actor_scope  # noqa: E402
from governance.models import (  # noqa: E402
    Agent,
    Fact,
    Principal,
    Project,
    RetrievalEvent,
    ReviewDecision,
    Session,
    SessionBlock,
    Write,
)
from governance.models.retrievals import encode_candidate  # noqa: E402
from governance.rules import erasure as rules  # noqa: E402
from governance.rules.text import statement_fingerprint  # noqa: E402
from governance.selectors import audit as audit_selectors  # noqa: E402
from governance.selectors import erasures as selectors  # noqa: E402
from governance.services import agents as agent_service  # noqa: E402
from governance.services import checkpoints  # noqa: E402
from governance.services import erasure as erasure_service  # noqa: E402
from governance.services.facts import statement_digest  # noqa: E402

KINDS = ["preference", "profile", "incident", "tool_instruction", "episodic", "summary"]
STATUSES = ["active", "superseded", "pending_review", "quarantined", "rejected", "expired", "out_of_scope"]


def populate(
    project: Project, agent: Agent, external_id: str, facts: int, events: int, reviewer: User
) -> Principal:
    rng = random.Random(external_id)
    key = settings.TOMBSTONE_KEY.encode()
    now = timezone.now()
    person = Principal.objects.create(project=project, external_id=external_id)
    sessions = Session.objects.bulk_create(
        [
            Session(
                project=project,
                agent=agent,
                principal=person,
                external_id=f"{external_id}-s{i}",
                resume_hint=f"{external_id} was in the middle of request {i}",
                ended_at=now - timedelta(days=1),
            )
            for i in range(max(1, events // 10))
        ]
    )
    rows = []
    for i in range(facts):
        statement = f"{external_id} remembered item {i}: likes option {rng.randint(0, 10**6)}"
        kind = KINDS[i % len(KINDS)]
        rows.append(
            Fact(
                project=project,
                principal=person,
                kind=kind,
                statement=statement,
                source_type="user_statement",
                source_ref=f"chat:bench/{external_id}",
                source_observed_at=now - timedelta(days=2),
                writer=f"agent:{agent.slug}",
                agent=agent,
                authority=4,
                last_verified_at=now - timedelta(days=2),
                status=STATUSES[i % len(STATUSES)] if i % 3 else "active",
                embedding=[rng.random() for _ in range(settings.EMBEDDING_DIMENSIONS)],
                embedded_at=now,
                statement_digest=statement_digest(statement),
                fingerprint=statement_fingerprint(statement, key),
                summary_source=f"conversation {i} of {external_id}" if kind == "summary" else None,
            )
        )
    created = Fact.objects.bulk_create(rows, batch_size=1000)
    writes = Write.objects.bulk_create(
        [
            Write(
                project=project,
                agent=agent,
                principal=person,
                kind=f.kind,
                statement=f.statement,
                fingerprint=f.fingerprint,
                source_type=f.source_type,
                source_ref=f.source_ref,
                source_observed_at=f.source_observed_at,
                authority=4,
                findings=[
                    {"check": "near_duplicate", "severity": "low", "detail": f"Repeats '{f.statement}'"}
                ],
                outcome="active",
                status="active",
                fact=f,
                response={"id": 0, "status": "active", "findings": [{"detail": f.statement}]},
            )
            for f in created
        ],
        batch_size=1000,
    )
    ReviewDecision.objects.bulk_create(
        [
            ReviewDecision(write=w, reviewer=reviewer, action="approve", reason=f"Checked: '{w.statement}'")
            for w in writes[::10]
        ]
    )
    assert agent.active_policy is not None
    for i in range(events):
        chosen = rng.sample(created, min(8, len(created)))
        context = "\n".join(
            ["Remembered context (reference only).", "About the user:"]
            + [f"- {f.statement} [SOURCE: {f.source_ref} | AUTHORITY: 4 | AGE: 2 days]" for f in chosen]
        )
        session = sessions[i % len(sessions)]
        event = RetrievalEvent(
            project=project,
            agent=agent,
            principal=person,
            session=session,
            policy_version=agent.active_policy,
            query=f"what does {external_id} want {i}",
            mode="resume",
            identity_verified=True,
            context=context,
            tokens_used=100,
            token_budget=600,
            candidate_count=len(chosen),
            excluded_count=0,
            created_at=now - timedelta(minutes=events - i),
        )
        event.candidate_data = [
            encode_candidate(f.pk, "selected", None, r, "recent", 2, False, 0, {})
            for r, f in enumerate(chosen, start=1)
        ]
        event.candidate_fact_ids = event.selected_fact_ids = [f.pk for f in chosen]
        event.context_seal = checkpoints.seal_retrieval(
            project.pk, agent.pk, event.created_at, event.query, event.context, event.candidate_data
        )
        event.save()
        SessionBlock.objects.get_or_create(
            session=session,
            principal=person,
            identity_verified=True,
            policy_version=agent.active_policy,
            defaults={"mode": "resume", "text": context, "tokens": 100, "fact_ids": [f.pk for f in chosen]},
        )
    return person


def run(facts: int, events: int) -> None:
    with actor_scope("bench"):
        project = Project.objects.create(slug="bench", name="Bench")
        agent = agent_service.ensure_agent(project, "bench-bot")
        reviewer = User.objects.create_user("bench-reviewer")
        started = time.perf_counter()
        with transaction.atomic():
            person = populate(project, agent, "bench-person", facts, events, reviewer)
            other = populate(
                project, agent, "bench-other", max(1, facts // 10), max(1, events // 10), reviewer
            )
        print(
            f"stored {facts} facts, {events} retrievals for one person: {time.perf_counter() - started:.1f} s"
        )
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")

        started = time.perf_counter()
        dry = selectors.inventory(person)
        print(f"dry run: {time.perf_counter() - started:.2f} s, {dry.total} items")
        for _, label, count in dry.rows:
            print(f"  {count:>7}  {label}")

        started = time.perf_counter()
        job = erasure_service.start_erasure(
            person, reason="Benchmark DP-1", actor="user:bench-reviewer", user=reviewer
        )
        erasure_service.run(job.pk)
        elapsed = time.perf_counter() - started
        job.refresh_from_db()
        assert job.status == "succeeded", job.error
        receipt = job.result["receipt"] if job.result else {}
        print(f"erasure of {facts} facts: {elapsed:.1f} s ({job.status})")
        for _, label, count in rules.labelled(receipt["counts"]):
            print(f"  {count:>7}  {label}")
        print(f"  tombstones: {len(receipt['tombstones'])}; audit entry #{receipt['audit']['sequence']}")
        started = time.perf_counter()
        problems = selectors.receipt_problems(receipt)
        print(
            f"receipt verified against the chain in {time.perf_counter() - started:.2f} s: {problems or 'ok'}"
        )
        assert not problems
        assert audit_selectors.verify_chain() is None and checkpoints.verify_retrieval_seals() is None
        assert not Fact.objects.filter(principal=person).exclude(statement="").exists()
        untouched = Fact.objects.filter(principal=other).exclude(statement="").count()
        print(f"the other person's facts untouched: {untouched}")

        started = time.perf_counter()
        again = erasure_service.start_erasure(person, reason="Benchmark again", actor="user:bench-reviewer")
        erasure_service.run(again.pk)
        again.refresh_from_db()
        second = again.result["receipt"] if again.result else {}
        print(f"second request: {time.perf_counter() - started:.2f} s, nothing new: {second['nothing_new']}")


def demo() -> None:
    """``manage.py load_demo``, then forget the demo person with the most records: dry run and receipt."""
    import json

    from django.core.management import call_command
    from django.db.models import Count

    call_command("load_demo", verbosity=0)
    people = Principal.objects.annotate(
        records=Count("facts", distinct=True)
        + Count("writes", distinct=True)
        + Count("retrievals", distinct=True)
    ).order_by("-records", "pk")
    person = people.select_related("project").first()
    assert person is not None
    print(
        f"demo person with the most records: {person.external_id} ({person.project.slug}), {person.records}"
    )
    dry = selectors.inventory(person)
    print(f"dry run: {dry.total} items")
    for _, label, count in dry.rows:
        print(f"  {count:>5}  {label}")
    reviewer = User.objects.filter(memberships__project=person.project, memberships__role="reviewer").first()
    with actor_scope("bench"):
        started = time.perf_counter()
        job = erasure_service.start_erasure(
            person,
            reason="Data-protection request DP-118",
            actor=f"user:{reviewer.get_username()}" if reviewer else "user:demo",
            user=reviewer,
        )
        erasure_service.run(job.pk)
    job.refresh_from_db()
    receipt = job.result["receipt"] if job.result else {}
    elapsed = time.perf_counter() - started
    print(f"erased in {elapsed:.2f} s; receipt verifies: {selectors.receipt_problems(receipt) or 'ok'}")
    print(json.dumps(receipt, indent=2, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=5000)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    parser.add_argument(
        "--demo", action="store_true", help="forget the demo person with the most records instead"
    )
    args = parser.parse_args()
    connection.settings_dict.setdefault("TEST", {})["NAME"] = "test_memoryadmin_bench_erasure"
    old_config = setup_databases(verbosity=1, interactive=False, keepdb=False)
    try:
        demo() if args.demo else run(args.facts, args.events)
    finally:
        if args.keep:
            print(f"kept database {connection.settings_dict['NAME']}")
        else:
            teardown_databases(old_config, verbosity=1)


if __name__ == "__main__":
    main()
