"""Listing helpers: narrowing by the filters a person filled in."""

from __future__ import annotations

import pytest

from governance.models import Principal
from governance.selectors.pages import narrowed
from tests.personas import PrincipalFactory

pytestmark = pytest.mark.django_db


def test_a_filter_left_empty_means_any_and_a_filled_one_narrows(project, other_project):
    PrincipalFactory.create(project=project, external_id="alice")
    PrincipalFactory.create(project=project, external_id="bob")
    PrincipalFactory.create(project=other_project, external_id="alice-at-globex")
    everyone = Principal.objects.order_by("external_id")

    def ids(**lookups: object) -> list[str]:
        return list(narrowed(everyone, **lookups).values_list("external_id", flat=True))

    assert ids(project_id=None, external_id__icontains="") == ["alice", "alice-at-globex", "bob"]
    assert ids(project_id=project.pk, external_id__icontains="") == ["alice", "bob"]
    assert ids(project_id=None, external_id__icontains="alice") == ["alice", "alice-at-globex"]
    assert ids(project_id=other_project.pk, external_id__icontains="alice") == ["alice-at-globex"]
