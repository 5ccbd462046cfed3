"""The console's fact list (issue 16 item 7): filters, scope, pages, one query."""

from __future__ import annotations

import pytest

from governance.selectors.facts import FactFilters, fact_list
from tests.personas import FactFactory, PrincipalFactory

pytestmark = pytest.mark.django_db


def ids(project_ids, filters=None):
    return [f.pk for f in fact_list(project_ids, filters or FactFilters(), cursor=None, limit=50).items]


def test_filters_combine_and_the_scope_holds(project, other_project):
    carol = PrincipalFactory.create(project=project, external_id="carol")
    tea = FactFactory.create(
        project=project, principal=carol, statement="Carol prefers tea", kind="preference"
    )
    office = FactFactory.create(
        project=project, statement="Office is in Porto", kind="project_fact", source_type="documentation"
    )
    old = FactFactory.create(
        project=project, principal=carol, statement="Carol prefers coffee", status="superseded"
    )
    theirs = FactFactory.create(project=other_project, statement="Carol prefers tea, says Globex")
    mine = [project.pk]

    assert ids(mine) == [old.pk, office.pk, tea.pk]  # newest first; never project B's
    assert ids(mine, FactFilters(principal="carol")) == [old.pk, tea.pk]
    assert ids(mine, FactFilters(principal="carol", status="active")) == [tea.pk]
    assert ids(mine, FactFilters(kind="project_fact")) == [office.pk]
    assert ids(mine, FactFilters(source_type="documentation")) == [office.pk]
    assert ids(mine, FactFilters(text="prefers")) == [old.pk, tea.pk]
    assert ids(mine, FactFilters(text="Port")) == [office.pk]  # part of a word
    # Naming project B does not widen the scope.
    assert ids(mine, FactFilters(project=other_project.pk)) == []
    assert ids([project.pk, other_project.pk], FactFilters(text="tea")) == [theirs.pk, tea.pk]


def test_pages_walk_newest_first_without_gaps_or_repeats(project):
    made = [FactFactory.create(project=project).pk for _ in range(7)]
    page = fact_list([project.pk], FactFilters(), cursor=None, limit=3)
    seen = [f.pk for f in page.items]
    while page.next_cursor is not None:
        page = fact_list([project.pk], FactFilters(), cursor=page.next_cursor, limit=3)
        seen += [f.pk for f in page.items]
    assert seen == sorted(made, reverse=True)


def test_one_query_per_page(project, django_assert_num_queries):
    carol = PrincipalFactory.create(project=project, external_id="carol")
    FactFactory.create_batch(5, project=project, principal=carol)
    with django_assert_num_queries(1):
        page = fact_list([project.pk], FactFilters(text="Remembered"), cursor=None, limit=50)
        assert {(f.project.slug, f.principal and f.principal.external_id) for f in page.items} == {
            ("acme", "carol")
        }
