"""The one keyset cursor: what it makes it reads back, anything else is refused the same way."""

from datetime import UTC, datetime

import pytest

from governance.selectors.cursors import InvalidCursor, decode_cursor, encode_cursor

MOMENT = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def test_a_cursor_reads_back_exactly_to_the_microsecond() -> None:
    assert decode_cursor(encode_cursor(MOMENT, 7, 42), 2) == (MOMENT, (7, 42))
    assert decode_cursor(encode_cursor(MOMENT, 42), 1) == (MOMENT, (42,))


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "1_2",  # one number short
        "1_2_3_4",  # one too many
        "-1_2_3",
        "1_²_3",  # a digit int() refuses
        "1_2_" + "9" * 20,  # beyond a bigint
        "9" * 18 + "_1_1",  # beyond the calendar
        "eyJhIjoxfQ",  # base64 JSON, the queue's old shape
    ],
)
def test_anything_else_is_one_plain_error(value: str) -> None:
    with pytest.raises(InvalidCursor, match="start again from the first page"):
        decode_cursor(value, 2)
