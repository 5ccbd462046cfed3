"""services.session_blocks: the cache of session-start blocks (R12), stored by one upsert."""

from __future__ import annotations

import pytest

from governance.models import SessionBlock
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("principal", ["alice", None])
def test_a_recomputed_block_replaces_the_cached_one_under_its_key(
    support_bot: AgentPersona, config_bot: AgentPersona, principal: str | None
) -> None:
    """A missing principal is a value of the key: project-only sessions keep one block too."""
    support_bot.write("Prefers tea", kind="preference")
    config_bot.write("The office opens at nine", kind="project_fact", principal=None, source="config")
    support_bot.retrieve("s-1", principal=principal, round=1)
    first = SessionBlock.objects.get(session__external_id="s-1")

    config_bot.write("The office closes at six", kind="project_fact", principal=None, source="config")
    support_bot.retrieve("s-1", principal=principal, round=1)

    block = SessionBlock.objects.get(session__external_id="s-1")
    assert block.pk == first.pk
    assert block.created_at == first.created_at
    assert "closes at six" in block.text and "closes at six" not in first.text
    assert len(block.fact_ids) == len(first.fact_ids) + 1
