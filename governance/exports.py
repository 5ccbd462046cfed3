"""The streamed history export shared by the console and the governance API."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone

from governance.rules import export as export_rules
from governance.selectors import audit as audit_selectors
from governance.services import audit
from memoryadmin import routers


def _stream(
    projects: QuerySet[Any], filters: audit_selectors.HistoryFilters, fmt: str, read: routers.ReplicaRead
) -> Iterator[bytes]:
    # The replica decision holds around each chunk's reads, not across a
    # yield: between chunks the code that runs is the server's, and its reads
    # are not the export's.
    chunks = _lines(projects, filters, fmt)
    while True:
        with routers.reading_from_replica(read):
            chunk = next(chunks, None)
        if chunk is None:
            return
        yield chunk


def _lines(projects: QuerySet[Any], filters: audit_selectors.HistoryFilters, fmt: str) -> Iterator[bytes]:
    # No transaction around the download (issue 19.8): one stayed open for as
    # long as a slow client read. The rows come in keyset-paginated chunks,
    # each a short query of its own.
    rows = (item.export_row() for item in audit_selectors.export_items(projects, filters))
    lines = (
        export_rules.csv_lines(audit_selectors.EXPORT_COLUMNS, rows)
        if fmt == "csv"
        else export_rules.jsonl_lines(rows)
    )
    yield from export_rules.chunked(lines)


def export_response(
    projects: QuerySet[Any], filters: audit_selectors.HistoryFilters, fmt: str
) -> StreamingHttpResponse:
    if fmt not in export_rules.FORMATS:
        raise ValueError(f"Unknown export format {fmt!r}.")
    # On the primary, before the copy is read: entries committed so far carry
    # their place in the chain (one that commits during the download may not).
    for project_id in audit_selectors.scoped_project_ids(projects, filters):
        audit.seal(project_id)
    # Read from the replica when there is one (memoryadmin.routers): an export
    # is a long scan of old rows. The response names how fresh that copy was.
    with routers.reading_from_replica() as read:
        pass
    stream = _stream(projects, filters, fmt, read)
    # The first chunk is read here, in the view: a database lost before any
    # row goes out answers like any other page (503, try again), where the
    # server would otherwise have sent a 500 or a 200 with an empty file. One
    # lost later cuts the transfer without its last chunk, which every HTTP
    # client reports as an incomplete download.
    first = next(stream, b"")
    response = StreamingHttpResponse(
        itertools.chain((first,), stream), content_type=export_rules.CONTENT_TYPES[fmt]
    )
    if read.from_replica:
        response[routers.READ_FROM_HEADER] = read.header()
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="audit-history-{stamp}.{fmt}"'
    # Proxies must pass rows on as they come, not buffer the whole download.
    response["X-Accel-Buffering"] = "no"
    response["Cache-Control"] = "no-store"
    return response
