"""Labelled identifiers: what the console prints and what the search box reads back (issue 16 item 8)."""

from __future__ import annotations

import pytest

from governance.rules.references import Reference, fact_ref, parse_reference, write_ref


def test_facts_and_writes_print_with_distinct_letters():
    assert fact_ref(240) == "F-240"
    assert write_ref(241) == "W-241"
    assert fact_ref("7") == "F-7"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("F-240", Reference("fact", 240)),
        ("f240", Reference("fact", 240)),
        (" F - 240 ", Reference("fact", 240)),
        ("F-#240", Reference("fact", 240)),
        ("W-241", Reference("write", 241)),
        ("w241", Reference("write", 241)),
        ("#123", Reference("any", 123)),
        ("123", Reference("any", 123)),
    ],
)
def test_the_printed_forms_read_back(text, expected):
    assert parse_reference(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "F-", "X-12", "F-0", "#0", "12 seats", "F-12-3", "9" * 20, "99999999999999999999", "F-1e3", "٣"],
)
def test_anything_else_is_text_not_an_id(text):
    assert parse_reference(text) is None


def test_the_largest_database_id_is_still_an_id_and_one_more_is_not():
    assert parse_reference(str(2**63 - 1)) == Reference("any", 2**63 - 1)
    assert parse_reference(str(2**63)) is None
