"""A withdrawn statement cannot come back in other words (R8), through the agent API.

Issue "Memory that stays right": "The user mentioned their home is 12 Elm
Street in Springfield." was accepted and injected after "I live at 12 Elm
Street, Springfield." was withdrawn. Tombstones now keep keyed hashes of the
statement's identifying values, never its text or an embedding.
"""

from __future__ import annotations

import pytest

from governance.models import Tombstone
from tests.personas import AgentPersona

pytestmark = pytest.mark.django_db

HOME = "I live at 12 Elm Street, Springfield."


def withdraw(agent: AgentPersona, fact_id: int) -> None:
    response = agent.client.post(
        f"/api/v1/facts/{fact_id}/withdraw",
        {"reason": "The user asked us to forget it", "principal": "alice"},
        format="json",
    )
    assert response.status_code == 200, response.content


def test_a_rewording_of_a_withdrawn_address_is_held(support_bot: AgentPersona) -> None:
    withdraw(support_bot, support_bot.write(HOME)["fact"]["id"])

    again = support_bot.write("The user mentioned their home is 12 Elm Street in Springfield.", ref="chat:2")

    assert again["status"] == "quarantined"
    finding = next(f for f in again["findings"] if f["check"] == "tombstoned")
    assert "street address" in finding["detail"] and "Elm" not in finding["detail"]
    assert "Elm Street" not in support_bot.retrieve()["context"]


def test_the_tombstone_keeps_no_text(support_bot: AgentPersona) -> None:
    withdraw(support_bot, support_bot.write(HOME)["fact"]["id"])

    tombstone = Tombstone.objects.get()
    assert len(tombstone.value_digests) == 3
    assert not any("elm" in d.casefold() or "springfield" in d.casefold() for d in tombstone.value_digests)


@pytest.mark.parametrize(
    "ordinary",
    [
        "I love the park in Springfield.",
        "I have 12 houseplants.",
        "My neighbour lives at 14 Elm Street, Springfield.",
    ],
)
def test_ordinary_statements_sharing_a_common_value_are_not_blocked(
    support_bot: AgentPersona, ordinary: str
) -> None:
    withdraw(support_bot, support_bot.write(HOME)["fact"]["id"])

    assert support_bot.write(ordinary, ref="chat:2")["status"] == "active"
    assert ordinary in support_bot.retrieve()["context"]


def test_another_persons_address_is_not_blocked(support_bot: AgentPersona) -> None:
    withdraw(support_bot, support_bot.write(HOME)["fact"]["id"])

    assert (
        support_bot.write("Bob lives at 12 Elm Street, Springfield.", principal="bob")["status"] == "active"
    )
