"""The default relevance floor keeps loosely related episodic memory out (R14 ``low_relevance``).

Issue "Memory that stays right", item 5: with the old default floor (0.2) the
labelled set's "planning the party" query injected six episodic items for two
targets. A new agent now gets the floor chosen on that set (docs/relevance.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from governance.services.relevance import labelled_set
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


def test_a_query_gets_its_targets_not_the_neighbourhood(
    support_bot: AgentPersona, django_capture_on_commit_callbacks: Any
) -> None:
    data = labelled_set()
    # The party's two facts, every other fact the old floor let in for this
    # query, and a few unrelated ones (the whole set takes minutes to write).
    chosen = ("f30", "f32", "f41", "f05", "f03", "f23", "f07", "f16", "f24", "f38")
    for fact_id in chosen:
        statement = data.facts[fact_id]
        # Facts are embedded once their write commits; run that here.
        with django_capture_on_commit_callbacks(execute=True):
            response = support_bot.client.post(
                "/api/v1/writes",
                {
                    "principal": "alice",
                    "kind": "episodic",
                    "statement": statement,
                    "source": {
                        "type": "user_statement",
                        "ref": f"chat:{fact_id}",
                        "observed_at": timezone.now().isoformat(),
                    },
                },
                format="json",
            )
        assert response.status_code == 201, response.content

    response = support_bot.client.post(
        "/api/v1/retrieve",
        {
            "principal": "alice",
            "session": "s-1",
            "round": 1,
            "query": "planning the party",
            "identity_verified": True,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    injected = {item["source_ref"] for item in response.json()["items"] if item["kind"] == "episodic"}
    assert injected == {"chat:f30", "chat:f32"}
