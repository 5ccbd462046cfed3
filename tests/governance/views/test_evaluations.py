"""The memory-quality pages: run history, one run's results, starting a run from the console."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from governance.models import EvaluationRun
from governance.services import evaluations

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_policy_editor_starts_a_run_and_reads_its_results(client: Any, policy_editor: Any) -> None:
    client.force_login(policy_editor)

    response = client.post(reverse("quality:runs"), {"scenario": "swapped_identifiers"})

    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("quality:run", args=[run.pk])
    # Celery runs eagerly in tests: the job has finished by the time the page is read.
    assert run.origin == "console" and run.started_by == policy_editor
    page = client.get(response["Location"]).content.decode()
    assert 'data-scenario="swapped-identifiers"' in page
    assert "Needed facts given" in page and "all met" in page
    history = client.get(reverse("quality:runs")).content.decode()
    assert f'data-run="{run.pk}"' in history and policy_editor.get_username() in history


def test_a_failing_run_says_what_was_given(client: Any, auditor: Any) -> None:
    run = evaluations.create_run(
        [evaluations.SCENARIO_DIR / "broken" / "broken_policy.yaml"], origin="command"
    )
    evaluations.execute_run(run.pk)
    client.force_login(auditor)

    page = client.get(reverse("quality:run", args=[run.pk])).content.decode()

    assert "missed" in page
    assert "gave forbidden item" in page
    assert 'class="missed"' in page


def test_an_auditor_cannot_start_a_run(client: Any, auditor: Any) -> None:
    client.force_login(auditor)

    assert client.post(reverse("quality:runs"), {"scenario": "all"}).status_code == 403
    assert not EvaluationRun.objects.exists()
    assert "Start a run" not in client.get(reverse("quality:runs")).content.decode()


def test_an_unknown_scenario_is_refused_and_nothing_starts(client: Any, policy_editor: Any) -> None:
    client.force_login(policy_editor)

    response = client.post(reverse("quality:runs"), {"scenario": "../../etc/passwd"})

    assert response.status_code == 400
    assert "Choose one of the listed scenarios." in response.content.decode()
    assert not EvaluationRun.objects.exists()


def test_progress_is_a_fragment_while_the_run_plays(client: Any, auditor: Any) -> None:
    small = ("swapped_identifiers", "episodic_relevance", "freshness_tiers")
    run = evaluations.create_run(
        [evaluations.SCENARIO_DIR / f"{name}.yaml" for name in small], origin="command"
    )
    client.force_login(auditor)

    fragment = client.get(reverse("quality:run", args=[run.pk]), HTTP_HX_REQUEST="true")

    body = fragment.content.decode()
    assert body.lstrip().startswith('<section id="quality-progress"')
    assert "0 of 3 scenarios" in body.replace('<span id="quality-done">0</span>', "0")
    evaluations.execute_run(run.pk)
    done = client.get(reverse("quality:run", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true"
