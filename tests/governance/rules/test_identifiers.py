"""Identifying values of a statement and when a rewording shares enough of them (R8)."""

from __future__ import annotations

import pytest

from governance.rules.identifiers import blocks, describe, identifying_values, value_digests

KEY = b"tombstone-key"
WITHDRAWN = "I live at 12 Elm Street, Springfield."


def test_values_are_canonical_so_rewordings_meet() -> None:
    assert identifying_values(WITHDRAWN) == {
        "address:12 elm st": "address",
        "place:elm st": "place",
        "place:springfield": "place",
    }
    assert "address:12 elm st" in identifying_values("Her home is 12 elm st. in springfield")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Write to Alice.Smith@Example.com please", "email:alice.smith@example.com"),
        ("Call me on 0113 496 0000.", "phone:01134960000"),
        ("Her number is +44 113-496-0000", "phone:441134960000"),
        # A long number is strong whichever way it reads: an account or a phone.
        ("Account 12-3456-789 is hers.", "phone:123456789"),
        ("Meet Alice Smith tomorrow.", "name:alice smith"),
    ],
)
def test_kinds_of_identifying_value(text: str, value: str) -> None:
    assert value in identifying_values(text)


@pytest.mark.parametrize(
    "rewording",
    [
        "The user mentioned their home is 12 Elm Street in Springfield.",
        "Address: 12 Elm St, Springfield",
        "She's at 12 elm street.",
    ],
)
def test_a_rewording_with_the_address_is_blocked(rewording: str) -> None:
    assert blocks(value_digests(rewording, KEY), value_digests(WITHDRAWN, KEY)) is not None


@pytest.mark.parametrize(
    "ordinary",
    [
        "Springfield is lovely in spring.",  # the city alone
        "I have 12 cats.",  # a bare small number
        "We met at 12 in Springfield.",  # a number and a city: still common
        "I live on Elm Street.",  # the street without the house
        "My neighbour lives at 14 Elm Street, Springfield.",  # another house
    ],
)
def test_common_values_alone_do_not_block(ordinary: str) -> None:
    assert blocks(value_digests(ordinary, KEY), value_digests(WITHDRAWN, KEY)) is None


def test_a_name_needs_another_value_beside_it() -> None:
    withdrawn = value_digests("Alice Smith lives in Springfield.", KEY)
    assert blocks(value_digests("Alice Smith called.", KEY), withdrawn) is None
    assert blocks(value_digests("Alice Smith moved away from Springfield.", KEY), withdrawn) == (
        "name",
        "place",
    )


def test_a_phone_number_alone_is_enough() -> None:
    withdrawn = value_digests("Alice's phone is 0113 496 0000.", KEY)
    assert blocks(value_digests("Ring 0113-496-0000 for her.", KEY), withdrawn) == ("phone",)


def test_digests_are_keyed_and_hold_no_text() -> None:
    digests = value_digests(WITHDRAWN, KEY)
    assert digests.keys().isdisjoint(value_digests(WITHDRAWN, b"another-key"))
    assert all(len(d) == 64 and "elm" not in d for d in digests)
    with pytest.raises(ValueError):
        value_digests(WITHDRAWN, b"")


def test_describe_names_kinds_never_values() -> None:
    assert describe(("address", "place", "place")) == "street address and place"
    assert describe(("phone",)) == "phone number"
