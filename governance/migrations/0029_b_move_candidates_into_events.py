"""Existing candidate rows become their event's compact document, and the events are re-sealed.

Data only, reversible. Retrieval events refuse UPDATE (R15); this runs as the
owner role (``manage.py migrate``), whose ``pgtrigger.ignore`` the triggers
honour, and names the one trigger it skips.

The seal now covers the candidates too (governance.rules.seals). An event is
re-sealed only when its old seal still verifies, so an event altered before
the migration keeps failing ``verify_audit`` instead of being blessed by it.
The seal formulas are frozen copies here: later changes to the application's
must not change what this migration did.
"""

import hashlib
import hmac
import json
from datetime import UTC
from typing import Any

from django.conf import settings
from django.db import migrations

SKIP_UPDATE = "SET LOCAL pgtrigger.ignore = '{pgtrigger_retrieval_no_update_9b4ab}'"

TO_EVENTS = """
UPDATE governance_retrievalevent AS e
   SET candidate_data = c.data, candidate_fact_ids = c.ids, selected_fact_ids = c.selected
  FROM (
      SELECT event_id,
             jsonb_agg(jsonb_build_array(
                 fact_id, reason, rank, tier, age_days, per_round::int, tokens,
                 round(COALESCE((scores->>'relevance')::numeric, 0), 6),
                 round(COALESCE((scores->>'freshness')::numeric, 0), 6),
                 round(COALESCE((scores->>'confidence')::numeric, 0), 6),
                 round(COALESCE((scores->>'total')::numeric, 0), 6)
             ) ORDER BY id) AS data,
             array_agg(fact_id ORDER BY id) AS ids,
             COALESCE(array_agg(fact_id ORDER BY rank, id) FILTER (WHERE decision = 'selected'), '{}')
                 AS selected
        FROM governance_retrievalcandidate
       GROUP BY event_id
  ) AS c
 WHERE e.id = c.event_id
"""

TO_ROWS = """
INSERT INTO governance_retrievalcandidate
    (event_id, fact_id, decision, reason, rank, tier, age_days, per_round, scores, tokens)
SELECT e.id, (c->>0)::bigint,
       CASE WHEN c->1 = 'null'::jsonb THEN 'selected' ELSE 'excluded' END,
       c->>1, (c->>2)::int, c->>3, (c->>4)::int, (c->>5)::int = 1,
       jsonb_build_object('relevance', c->7, 'freshness', c->8, 'confidence', c->9, 'total', c->10),
       (c->>6)::int
  FROM governance_retrievalevent AS e
 CROSS JOIN LATERAL jsonb_array_elements(e.candidate_data) WITH ORDINALITY AS x(c, n)
 ORDER BY e.id, x.n
"""


def _seal(content: dict[str, Any]) -> str:
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(
        str(settings.AUDIT_CHECKPOINT_KEY).encode(), canonical.encode(), hashlib.sha256
    ).hexdigest()


def _reseal(schema_editor: Any, *, with_candidates: bool) -> None:
    """Re-seal every event whose seal verifies under the other formula."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, project_id, agent_id, created_at, query, context, candidate_data, context_seal "
            "FROM governance_retrievalevent ORDER BY id"
        )
        rows = cursor.fetchall()
        ids, seals = [], []
        for event_id, project, agent, created_at, query, context, data, seal in rows:
            candidates = json.loads(data) if isinstance(data, str | bytes) else data
            content: dict[str, Any] = {
                "project": project,
                "agent": agent,
                "created_at": created_at.astimezone(UTC).isoformat(timespec="microseconds"),
                "query": query,
                "context": context,
            }
            new = {**content, "candidates": candidates}
            before, after = (content, new) if with_candidates else (new, content)
            if seal and hmac.compare_digest(seal, _seal(before)):
                ids.append(event_id)
                seals.append(_seal(after))
        if ids:
            cursor.execute(
                "UPDATE governance_retrievalevent AS t SET context_seal = v.seal FROM "
                "(SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS seal) AS v WHERE t.id = v.id",
                [ids, seals],
            )


def forwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(SKIP_UPDATE)
        cursor.execute(TO_EVENTS)
    _reseal(schema_editor, with_candidates=True)


def backwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(SKIP_UPDATE)
        cursor.execute(TO_ROWS)
    _reseal(schema_editor, with_candidates=False)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0029_a_compact_retrieval_candidates"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
