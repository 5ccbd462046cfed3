"""``manage.py memory_eval``: the scenario suite over the real services (docs/quality.md).

``make test`` runs the shipped scenarios here and fails when any misses its
thresholds, or when the pooled rates miss the shipped targets.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from governance.models import EvaluationRun, Fact, RetrievalFeedback
from governance.services.evaluations import SCENARIO_DIR, shipped_scenarios

pytestmark = pytest.mark.django_db(transaction=True)

# Scenarios that describe the right behaviour but fail until another change
# lands, with why. Strict: once one passes, this test fails until it is removed here.
# Scenarios expected to fail until the issue named fixes them (strict: a pass fails the test).
PENDING: dict[str, str] = {}
BROKEN = SCENARIO_DIR / "broken" / "broken_policy.yaml"


def run(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("memory_eval", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


def test_at_least_twenty_scenarios_ship() -> None:
    assert len(shipped_scenarios()) >= 20
    assert BROKEN not in shipped_scenarios()


def test_every_shipped_scenario_meets_its_thresholds() -> None:
    files = [str(p) for p in shipped_scenarios() if p.name not in PENDING]
    code, out, err = run(*files)
    print(out)  # the per-scenario table, for `pytest -s`
    assert code == 0, out + err
    assert "overall" in out and "FAIL" not in out
    run_row = EvaluationRun.objects.get()
    assert run_row.passed is True and run_row.status == "succeeded"
    assert len(run_row.scenarios) == len(files)
    # Feedback steps went through the real service and were stored with their events.
    assert RetrievalFeedback.objects.exists()
    # The labelled contradiction pairs (issue 20), read from this one play rather than played again.
    results = {scenario["name"]: scenario for scenario in run_row.scenarios}
    pairs, near = results["contradiction-pairs"], results["contradiction-near-misses"]
    assert pairs["stale_adoption"] == 0.0, pairs["notes"]
    # No near-miss suppressed: every statement of every pair is injected. (Two were held once:
    # the scenario had the agent write "I live in Leeds." for five people within minutes, which
    # the write guard rightly holds as a burst; each person now has a city of their own.)
    assert near["recall"] == 1.0, near["notes"]


@pytest.mark.parametrize("name", sorted(PENDING))
def test_scenarios_waiting_for_other_fixes(name: str) -> None:
    code, _out, _ = run(str(SCENARIO_DIR / name), "--json")
    if code != 0:
        pytest.xfail(PENDING[name])
    pytest.fail(f"{name} passes now: move it out of PENDING.")


def test_a_deliberately_broken_policy_is_caught() -> None:
    code, out, _err = run(str(BROKEN), "--json")
    assert code == 1
    doc = json.loads(out)
    # Exactly the keys issue 14 names.
    assert set(doc) == {"overall", "scenarios"}
    assert set(doc["overall"]) == {
        "recall",
        "contamination",
        "stale_adoption",
        "cross_project_leakage",
        "write_back_amplification",
    }
    (scenario,) = doc["scenarios"]
    assert set(scenario) == {"name", "passed", *doc["overall"]}
    assert scenario["name"] == "broken-policy" and scenario["passed"] is False
    # The joke and the unverified person's phone number were both given.
    assert scenario["contamination"] > 0 and doc["overall"]["contamination"] > 0
    assert all(0 <= value <= 1 for value in doc["overall"].values())
    assert EvaluationRun.objects.get().passed is False


def test_the_table_names_the_miss_and_what_was_given(tmp_path: Path) -> None:
    code, out, err = run(str(BROKEN))
    assert code == 1
    assert "broken-policy" in out and "FAIL (contamination)" in out
    assert "gave forbidden item" in err


def test_scenarios_play_in_projects_of_their_own() -> None:
    code, _, _ = run("swapped_identifiers")
    assert code == 0
    slugs = set(Fact.objects.values_list("project__slug", flat=True))
    assert slugs and all(slug.startswith("eval-") for slug in slugs)


def test_a_bad_file_is_a_usage_error(tmp_path: Path) -> None:
    assert run(str(tmp_path / "missing.yaml"))[0] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  - retrieve: {expect: [nobody]}\n")
    code, _out, err = run(str(bad))
    assert code == 1
    assert "no earlier write named nobody" in err


def test_relevance_per_floor_recommends_the_shipped_floor() -> None:
    # The trade-off is measured on the labelled set, whichever scenario plays alongside;
    # the contradiction scenarios themselves are checked in the full play above.
    code, out, err = run("swapped_identifiers", "--json", "--relevance")

    assert code == 0, out + err
    doc = json.loads(out)
    assert [scenario["name"] for scenario in doc["scenarios"]] == ["swapped-identifiers"]
    assert doc["relevance"]["recommended_floor"] == 0.35
    floors = {row["threshold"]: row for row in doc["relevance"]["rows"]}
    assert floors[0.35]["precision"] > floors[0.2]["precision"]
    assert floors[0.35]["recall"] < floors[0.2]["recall"]
