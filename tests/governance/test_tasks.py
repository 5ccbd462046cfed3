"""Background tasks run in a real Celery worker, through the broker and the database."""

from __future__ import annotations

import pytest

from governance.models import Fact
from tests.helpers import wait_until
from tests.personas import FactFactory


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_task_sent_through_the_broker_runs_in_a_real_worker(project, real_worker):
    from governance.tasks import embed_fact

    fact = FactFactory.create(project=project, statement="The customer prefers invoices by email")
    assert fact.embedded_at is None
    result = embed_fact.delay(fact.pk)
    assert result.id
    # The worker process is another OS process on another connection: the
    # only way the vector gets here is through the broker and the database.
    embedded = wait_until(
        lambda: Fact.objects.filter(pk=fact.pk, embedded_at__isnull=False).first(), timeout=120
    )
    assert len(embedded.embedding) == 384
