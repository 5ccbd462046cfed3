"""``manage.py retrieval_upkeep`` says what it made and what it expired."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from governance.models import RetrievalEvent
from tests.personas import make_retrieval_event


@pytest.mark.django_db
def test_the_command_expires_old_months_and_says_so(support_bot: Any) -> None:
    make_retrieval_event(
        support_bot.agent, query="a", context="- a", created_at=datetime(2025, 5, 5, tzinfo=UTC)
    )
    recent = make_retrieval_event(support_bot.agent, query="b", context="- b")
    out = StringIO()

    call_command("retrieval_upkeep", stdout=out)

    assert "Expired 2025-05: 1 retrieval event(s), recorded in the audit trail" in out.getvalue()
    assert list(RetrievalEvent.objects.values_list("pk", flat=True)) == [recent.pk]

    again = StringIO()
    call_command("retrieval_upkeep", stdout=again)
    assert "The coming months' partitions already exist." in again.getvalue()
    assert "nothing expired" in again.getvalue()
