"""The audit export holds no transaction while a client reads (issue 19.8).

It used to read through server-side cursors inside one transaction that
stayed open for as long as the download: a slow client kept a snapshot (and
a connection) for minutes. It now reads keyset-paginated chunks, each a short
query of its own.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.utils import timezone

from governance.models import AuditEntry, RetrievalEvent
from governance.selectors import audit as audit_selectors
from tests.personas import make_retrieval_event, token_client


@pytest.mark.django_db
def test_chunks_return_every_row_once_in_order_even_with_equal_times(support_bot, project):
    # Same created_at on several rows: the keyset resumes on (created_at, id).
    same = timezone.now() - timedelta(hours=1)
    events = [make_retrieval_event(support_bot.agent, created_at=same) for _ in range(7)]
    events += [make_retrieval_event(support_bot.agent) for _ in range(4)]

    rows = list(
        audit_selectors.export_items(
            type(project).objects.filter(pk=project.pk), audit_selectors.HistoryFilters(), chunk_size=3
        )
    )

    retrievals = [row.id for row in rows if row.source == audit_selectors.RETRIEVAL]
    assert retrievals == sorted(e.pk for e in events)
    audits = [row.id for row in rows if row.source == audit_selectors.AUDIT]
    assert len(audits) == len(set(audits)) == AuditEntry.objects.filter(project=project).count()


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_the_client_reads(project, support_bot, auditor, settings):
    for _ in range(5):
        make_retrieval_event(support_bot.agent)
    client = token_client(auditor)

    response = client.get("/api/v1/admin/audit/export", {"format": "jsonl"})
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    lines: list[bytes] = []
    for chunk in response.streaming_content:
        # Between two pieces of the body (a slow client's pause), nothing is open.
        assert not connection.in_atomic_block
        lines.extend(chunk.splitlines())

    exported = [json.loads(line) for line in lines]
    assert (
        len([row for row in exported if row["source"] == "retrieval"]) == RetrievalEvent.objects.count() == 5
    )
