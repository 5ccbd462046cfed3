"""Every numeric policy field has a bound, and a policy at its bounds still serves retrievals (issue 19.3).

``max_items: 4000000000000000000`` was accepted and published, after which
every retrieval for the agent was a 500 (the candidate query's LIMIT
overflowed); ``1e400`` in a draft was a 500 too.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import PolicyDraft, PolicyVersion
from governance.rules.policy import BOUNDS, MAX_DAYS, PolicySettings
from tests.governance.policy_helpers import retrieve, write
from tests.personas import token_client

pytestmark = pytest.mark.django_db

POLICY = "/api/v1/admin/projects/acme/agents/support-bot/policy"

# What a field at a bound needs from its neighbours to make a valid policy:
# the confirm windows must stay above the plain ones.
COMPANIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("recent_days", "max"): {"confirm_days": MAX_DAYS},
    ("confirm_days", "min"): {"recent_days": 0},
    ("session_resume_days", "max"): {"session_confirm_days": MAX_DAYS},
    ("session_confirm_days", "min"): {"session_resume_days": 0},
}


@pytest.fixture
def editor(policy_editor) -> APIClient:
    client = token_client(policy_editor)
    client.default_format = "json"
    return client


@pytest.mark.parametrize(("name", "end"), [(name, end) for name in BOUNDS for end in ("min", "max")])
def test_each_numeric_field_publishes_at_its_bound_and_retrieval_still_works(editor, support_bot, name, end):
    low, high = BOUNDS[name]
    value = low if end == "min" else high
    if name not in ("decay_half_life_days",) and float(value).is_integer():
        value = int(value)
    write(support_bot, "Prefers invoices by email")
    write(support_bot, "Asked about the March invoice", kind="episodic")

    draft = editor.put(f"{POLICY}/draft", {name: value, **COMPANIONS.get((name, end), {})})
    assert draft.status_code == 200, draft.content
    published = editor.post(f"{POLICY}/publish", {"reason": f"{name} at its {end}imum"})
    assert published.status_code == 201, published.content
    assert editor.get(POLICY).json()["active"][name] == value

    # Session start, then a round with a query: the per-round search is the
    # query whose LIMIT overflowed.
    first = retrieve(support_bot, session="s-1")
    later = retrieve(support_bot, session="s-1", round=2, query="invoice")
    assert first["policy_version"] == later["policy_version"] == 2
    assert later["tokens_used"] <= later["token_budget"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"max_items": 4000000000000000000}', "max_items"),
        ('{"max_items": 201}', "max_items"),
        ('{"token_budget": 10000000000000000000000000000000}', "token_budget"),
        ('{"session_confirm_days": 1e300}', "session_confirm_days"),
        ('{"weight_relevance": 1e400}', "weight_relevance"),
        ('{"decay_half_life_days": -1e400}', "decay_half_life_days"),
        ('{"decay_half_life_days": 0.01}', "decay_half_life_days"),
        ('{"min_relevance": 1.5}', "min_relevance"),
        ('{"weight_freshness": 101}', "weight_freshness"),
        ('{"session_confirm_days": 3651}', "session_confirm_days"),
    ],
)
def test_out_of_bounds_and_non_finite_numbers_are_400_with_the_field(editor, support_bot, body, field):
    response = editor.put(f"{POLICY}/draft", data=body, content_type="application/json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == [field]
    assert all(isinstance(m, str) and m for m in error["fields"][field])
    assert not PolicyDraft.objects.exists()
    assert PolicyVersion.objects.count() == 1


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_400_json(editor, support_bot, literal):
    response = editor.put(
        f"{POLICY}/draft", data=f'{{"weight_relevance": {literal}}}', content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] in ("invalid", "parse_error")
    assert not PolicyDraft.objects.exists()


def test_the_error_names_the_bounds(editor, support_bot):
    response = editor.put(f"{POLICY}/draft", {"max_items": 4_000_000_000_000_000_000})
    assert response.json()["error"]["fields"]["max_items"] == ["Must be between 1 and 200."]


def _form(**changes: object) -> dict[str, object]:
    values = {**PolicySettings().to_dict(), **changes}
    data: dict[str, object] = {k: v for k, v in values.items() if not isinstance(v, bool)}
    data["require_identity_verification"] = "on"
    return data


def test_the_console_form_refuses_out_of_bounds_and_non_finite_values(client, support_bot, policy_editor):
    client.force_login(policy_editor)
    url = reverse("policies:save_draft", args=["acme", "support-bot"])

    too_many = client.post(url, _form(max_items=4_000_000_000_000_000_000))
    not_finite = client.post(url, _form(weight_relevance="1e400"))

    assert (too_many.status_code, not_finite.status_code) == (400, 400)
    html = too_many.content.decode()
    assert "Must be between 1 and 200." in html  # the same rule, and message, as the API
    assert 'max="200"' in html  # and the browser is told the bound up front
    assert "Enter a number." in not_finite.content.decode()
    assert not PolicyDraft.objects.exists()
