"""``manage.py memory_eval``: the scenario suite over the real services (docs/quality.md)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance.models import EvaluationRun
from governance.services.evaluations import SCENARIO_DIR

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("memory_eval", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


def test_every_shipped_scenario_meets_its_thresholds() -> None:
    code, out, err = run()
    print(out)
    print(err)
    assert code == 0, err
