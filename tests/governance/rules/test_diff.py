"""rules.diff.word_diff: the side-by-side word diff the review queue renders."""

from __future__ import annotations

import pytest

from governance.rules.diff import Segment, word_diff


def test_changed_word_is_deleted_on_the_left_and_inserted_on_the_right():
    diff = word_diff("Deploys to us-east-1 every Friday", "Deploys to eu-west-2 every Friday")

    assert diff.old == (
        Segment("equal", "Deploys to "),
        Segment("delete", "us-east-1"),
        Segment("equal", " every Friday"),
    )
    assert diff.new == (
        Segment("equal", "Deploys to "),
        Segment("insert", "eu-west-2"),
        Segment("equal", " every Friday"),
    )
    assert diff.changed


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("", "Lives in Lisbon"),
        ("Lives in Berlin", ""),
        ("Lives  in\nBerlin", "Moved to Lisbon in\tMay"),
        ("<b>bold</b> claim", "<i>other</i> claim"),
    ],
)
def test_each_side_joins_back_to_its_statement(old, new):
    diff = word_diff(old, new)

    assert "".join(s.text for s in diff.old) == old
    assert "".join(s.text for s in diff.new) == new
    assert {s.op for s in diff.old} <= {"equal", "delete"}
    assert {s.op for s in diff.new} <= {"equal", "insert"}


def test_identical_statements_have_no_change():
    assert not word_diff("Prefers tea", "Prefers tea").changed
