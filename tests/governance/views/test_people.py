"""The console's directory of people (issue 16 item 7)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.personas import FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db


def test_the_directory_lists_the_projects_people_with_links_to_their_memory(
    client, auditor, project, other_project
):
    carol = PrincipalFactory.create(project=project, external_id="carol")
    FactFactory.create_batch(3, project=project, principal=carol)
    PrincipalFactory.create(project=other_project, external_id="globex-dave")
    client.force_login(auditor)
    html = client.get(reverse("people:directory")).content.decode()
    assert 'href="/retrievals/principals/acme/carol/"' in html
    assert 'href="/facts/?project=acme&amp;principal=carol&amp;status=active">3</a>' in html
    assert "globex-dave" not in html
    assert "globex-dave" not in client.get(reverse("people:directory"), {"q": "dave"}).content.decode()
