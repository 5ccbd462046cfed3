"""R17: a summary that drops names, titles, numbers, dates, identifiers,
prohibitions or failed steps is flagged; a faithful one is not."""

from __future__ import annotations

import time

import pytest

from governance.rules.summaries import (
    CATEGORIES,
    DroppedItem,
    SummaryCheck,
    check_summary,
    highlight_source,
)


def dropped(summary: str, source: str) -> list[tuple[str, str]]:
    return [(item.category, item.text) for item in check_summary(summary, source).dropped]


# --- The design's examples ---------------------------------------------------


def test_dropping_the_vp_of_engineering_is_material() -> None:
    check = check_summary(
        "user is late for a meeting", "running late for a meeting with the VP of Engineering"
    )
    assert check.material
    assert ("title", "VP of Engineering") in [(d.category, d.text) for d in check.dropped]


def test_dropping_a_prohibition_is_flagged_with_the_whole_clause() -> None:
    source = "Customer prefers phone calls. Please never call after 6pm."
    check = check_summary("Customer prefers phone calls.", source)
    assert check.material
    prohibitions = [d for d in check.dropped if d.category == "prohibition"]
    assert len(prohibitions) == 1
    assert "never call after 6pm" in prohibitions[0].text
    assert source[prohibitions[0].start : prohibitions[0].end] == prohibitions[0].text


FAITHFUL = [
    (
        "Alice Chen (CTO) asked to move the deploy to eu-west-2 by 3 March; do not touch us-east-1.",
        "CTO Alice Chen wants the deploy moved to eu-west-2 by March 3rd and said not to touch us-east-1.",
    ),
    (
        "Ticket OPS-4411: the nightly backup failed twice on db-2 (10.0.3.17). "
        "Bob Marsh, our on-call engineer, is still investigating.",
        "OPS-4411: nightly backup on db-2 (10.0.3.17) failed 2 times; "
        "on-call engineer Bob Marsh still investigating.",
    ),
    (
        "Customer Maria Gonzalez is on the Pro plan at $49/month and wants a refund of $120 for invoice "
        "INV-20931. She asked us not to email her at maria@example.com again; use phone only.",
        "Maria Gonzalez (Pro plan, 49 dollars a month) wants a $120 refund on INV-20931. "
        "Do not email maria@example.com; phone only.",
    ),
    (
        "Running late for a meeting with the VP of Engineering at 3pm tomorrow.",
        "User is running late for tomorrow's 15:00 meeting with the vice president of engineering.",
    ),
    (
        "Upgrade the API servers to Python 3.13 before Friday. The staging run did not finish because "
        "the disk was full; three of eight hosts are done.",
        "Python 3.13 upgrade of the API servers is due before Friday; the staging run is incomplete "
        "(disk full) and 3 of 8 hosts are done.",
    ),
    (
        "Dr. Priya Nair, the family's lawyer, says the contract renewal is due on 2025-06-30 and the fee "
        "is 15%. Never share the draft with Acme Corp.",
        "Lawyer Dr Priya Nair: contract renewal due 30 June 2025, fee 15 percent. "
        "Acme Corp must never see the draft.",
    ),
    (
        "Jonas Weber, Head of Sales, approved a discount of $4,500 on the Globex renewal. "
        "The signed PDF is at https://files.example.com/globex/renewal.pdf "
        "but legal review is still pending.",
        "Head of Sales Jonas Weber approved a 4.5k dollar discount for the Globex renewal "
        "(files.example.com/globex/renewal.pdf); legal review still pending.",
    ),
    (
        "Weekend calls are not allowed. Reach Sam Okafor on Monday at 9am PST instead.",
        "No weekend calls allowed; contact Sam Okafor Monday 9am.",
    ),
]


@pytest.mark.parametrize(("source", "summary"), FAITHFUL)
def test_a_faithful_summary_is_not_flagged(source: str, summary: str) -> None:
    check = check_summary(summary, source)
    assert check.dropped == (), check.dropped
    assert not check.material


# --- One category at a time --------------------------------------------------

DROPS = [
    # names
    ("The budget was approved.", "Alice Chen approved the budget.", ("name", "Alice Chen")),
    ("Flight moved to the afternoon.", "Priya's flight moved to the afternoon.", ("name", "Priya")),
    ("Bob said he will look into it.", "Bob said Will Turner will look into it.", ("name", "Will Turner")),
    # titles
    ("Tom Reyes will send the papers.", "Her lawyer, Tom Reyes, will send the papers.", ("title", "lawyer")),
    ("Jonas approved the discount.", "Jonas, our Head of Sales, approved it.", ("title", "Head of Sales")),
    ("The CEO signed off.", "The CTO signed off.", ("title", "CTO")),
    # numbers
    ("The refund was approved.", "A refund of $1,250 was approved.", ("number", "$1,250")),
    ("A refund of $1,520 was approved.", "A refund of $1,250 was approved.", ("number", "$1,250")),
    ("Some hosts are still down.", "Three hosts are still down.", ("number", "Three")),
    # dates and times
    ("The contract ends soon.", "The contract ends on 30 June 2025.", ("date", "30 June 2025")),
    ("Meeting moved to Thursday 5 July.", "Meeting moved to Thursday 4 July.", ("date", "Thursday 4 July")),
    ("Call back at 7pm.", "Call back at 6pm.", ("date", "6pm")),
    ("The report is due.", "The report is due by end of day tomorrow.", ("date", "tomorrow")),
    # identifiers
    ("A ticket was opened for the outage.", "Opened ABC-123 for the outage.", ("identifier", "ABC-123")),
    (
        "Send the invoice by email.",
        "Send the invoice to billing@globex.io.",
        ("identifier", "billing@globex.io"),
    ),
    (
        "Docs are online.",
        "Docs are at https://docs.example.com/setup/.",
        ("identifier", "https://docs.example.com/setup/"),
    ),
    ("Upgrade to the latest Python.", "Upgrade to Python 3.13 this week.", ("identifier", "3.13")),
    ("Move the deploy to the EU region.", "Move the deploy to eu-west-2.", ("identifier", "eu-west-2")),
    (
        "The server at the office is down.",
        "The server at 192.168.4.20 is down.",
        ("identifier", "192.168.4.20"),
    ),
    # prohibitions and negations
    ("Customer: call after 6pm.", "Customer: never call after 6pm.", ("prohibition", "never call after 6pm")),
    ("Alice works at Acme.", "Alice no longer works at Acme.", ("prohibition", "no longer works at Acme")),
    (
        "Backups are kept.",
        "Backups must not be deleted before 90 days.",
        ("prohibition", "must not be deleted before 90 days"),
    ),
    (
        "User gets the weekly newsletter.",
        "Please stop sending the weekly newsletter.",
        ("prohibition", "stop sending the weekly newsletter"),
    ),
    (
        "Deploys happen on weekends.",
        "Weekend deploys are not allowed.",
        ("prohibition", "Weekend deploys are not allowed"),
    ),
    ("User is vegetarian.", "User is not vegetarian.", ("prohibition", "is not vegetarian")),
    # failed or unfinished steps
    (
        "The database migration ran.",
        "The database migration failed at step 3.",
        ("unfinished", "The database migration failed at step 3"),
    ),
    (
        "Refund for order #5521 processed.",
        "Refund for order #5521 is still pending.",
        ("unfinished", "Refund for order #5521 is still pending"),
    ),
    ("Rotated the keys.", "Rotated the keys. TODO: revoke the old API token.", ("unfinished", "TODO")),
    (
        "Investigated the Android crash.",
        "We couldn't reproduce the crash on Android.",
        ("unfinished", "We couldn't reproduce the crash on Android"),
    ),
    (
        "Release is ready.",
        "Release is blocked on legal review.",
        ("unfinished", "Release is blocked on legal review"),
    ),
    (
        "Invoice 88 sent.",
        "Invoice 88 has not yet been paid.",
        ("unfinished", "Invoice 88 has not yet been paid"),
    ),
    (
        "Staging run done.",
        "The staging run did not finish.",
        ("unfinished", "The staging run did not finish"),
    ),
]


@pytest.mark.parametrize(("summary", "source", "expected"), DROPS)
def test_a_dropped_item_is_reported_with_its_category(
    summary: str, source: str, expected: tuple[str, str]
) -> None:
    found = dropped(summary, source)
    category, text = expected
    assert any(c == category and text in t for c, t in found), found
    assert check_summary(summary, source).material


def test_a_flipped_prohibition_is_reported_even_when_its_words_survive() -> None:
    # The time and the verb are still there; the "never" is not.
    assert dropped("Customer: call after 6pm.", "Customer: never call after 6pm.") == [
        ("prohibition", "never call after 6pm")
    ]


def test_rewording_a_prohibition_keeps_it_but_a_changed_time_is_a_dropped_date() -> None:
    source = "Never call after 6pm."
    assert dropped("Do not phone after 6 p.m.", source) == []
    assert dropped("Avoid calling after 18:00.", source) == []
    assert dropped("Never call after 7pm.", source) == [("date", "6pm")]


def test_a_prohibition_with_none_of_its_words_in_a_negated_sentence_is_dropped() -> None:
    source = "Do not call after 6pm. The refund did not go through."
    assert dropped("The refund did not go through; call at 6pm.", source) == [
        ("prohibition", "Do not call after 6pm")
    ]


def test_a_failed_step_reworded_as_unsuccessful_is_kept() -> None:
    source = "The database migration failed at step 3."
    assert dropped("Step 3 of the database migration was unsuccessful.", source) == []
    assert dropped("Database migration: step 3 ran fine.", source) == [
        ("unfinished", "The database migration failed at step 3")
    ]


def test_items_inside_a_dropped_clause_are_not_listed_twice() -> None:
    check = check_summary("Nothing to report.", "Never email Alice Chen after 6pm.")
    assert [(d.category, d.text) for d in check.dropped] == [
        ("prohibition", "Never email Alice Chen after 6pm")
    ]


# --- Tolerance: the same item written differently is carried -----------------


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Met the VP of Engineering.", "Met the VP Engineering."),
        ("Met the Chief Technology Officer.", "Met the CTO."),
        ("Met the CTO.", "Met their chief technology officer."),
        ("Sent to the engineering manager.", "Sent to the Engineering Managers."),
        ("Alice Chen approved.", "Approved by alice."),
        ("Dr. Priya Nair called.", "Ms Nair called."),
        ("Budget is $4,500.", "Budget is 4500 dollars."),
        ("Budget is $4,500.", "Budget is $4.5k."),
        ("Three hosts failed.", "3 hosts failed."),
        ("The budget is twenty-five thousand dollars.", "Budget: $25,000."),
        ("Conversion is 15%.", "Conversion is 15 percent."),
        ("Due on 3 March.", "Due March 3rd, 2025."),
        ("Due on 2025-03-03.", "Due 3 March."),
        ("Due on Friday 3 March.", "Due 3 March."),
        ("Call at 6pm.", "Call at 18:00."),
        ("Hired 2000 people.", "Hired 2,000 people."),
        ("Read https://docs.example.com/setup/ first.", "Read docs.example.com/setup first."),
        ("Pin version 2.4.1.", "Pin v2.4.1."),
        ("Ticket ABC-123 is open.", "abc-123 open."),
    ],
)
def test_the_same_item_written_differently_is_carried(source: str, summary: str) -> None:
    assert dropped(summary, source) == []


def test_a_wordlike_name_must_keep_its_capital() -> None:
    source = "Bob said Will Turner will call."
    assert dropped("Bob said Will will call.", source) == []
    assert ("name", "Will Turner") in dropped("Bob said he will call.", source)


def test_a_different_day_of_the_same_month_is_not_the_same_date() -> None:
    assert dropped("Due 4 March.", "Due on 3 March.") == [("date", "3 March")]


# --- What is not an item -------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "Running late for the standup.",
        "Please confirm the new address.",
        "Thanks for the update on Monday.",  # Monday is a date, not a name
        "We may move the meeting.",  # "may" the verb, not the month
        "The deploy finished with no issues.",
    ],
)
def test_ordinary_sentences_yield_no_names_or_clauses(source: str) -> None:
    categories = {d.category for d in check_summary("", source).dropped}
    assert not categories & {"name", "prohibition", "unfinished"}, check_summary("", source).dropped


def test_sentence_start_names_need_evidence() -> None:
    # "Priya" is a known first name; "Zanele" is a subject doing something.
    assert ("name", "Priya") in dropped("", "Priya prefers email.")
    assert ("name", "Zanele") in dropped("", "Zanele asked for a callback.")
    assert ("name", "Alice") in dropped("", "Meeting Alice tomorrow.")


def test_an_empty_summary_drops_everything_and_an_empty_source_nothing() -> None:
    source = "Alice Chen (CTO) asked to move the deploy to eu-west-2 by 3 March; do not touch us-east-1."
    categories = {d.category for d in check_summary("", source).dropped}
    assert categories == {"name", "title", "identifier", "date", "prohibition"}
    assert check_summary("anything at all", "") == SummaryCheck()


def test_every_occurrence_is_reported_and_distinct_keeps_the_first() -> None:
    source = "Alice asked. Later Alice called again."
    check = check_summary("Someone called.", source)
    assert [(d.text, d.start) for d in check.dropped] == [("Alice", 0), ("Alice", 19)]
    assert [(d.text, d.start) for d in check.distinct()] == [("Alice", 0)]


def test_offsets_point_into_the_source_and_categories_are_known() -> None:
    source = (
        "Jonas Weber, Head of Sales, approved $4,500 for ABC-123 on 3 March. Never call him after 6pm. "
        "The export failed."
    )
    check = check_summary("", source)
    assert check.dropped
    for item in check.dropped:
        assert source[item.start : item.end] == item.text
        assert item.category in CATEGORIES


def test_to_dict_round_trips() -> None:
    check = check_summary("user is late", "running late for a meeting with the VP of Engineering")
    data = check.to_dict()
    assert data == {
        "material": True,
        "dropped": [{"category": "title", "text": "VP of Engineering", "start": 36, "end": 53}],
    }
    assert SummaryCheck(tuple(DroppedItem.from_dict(d) for d in data["dropped"])) == check


# --- highlight_source ------------------------------------------------------------


def test_highlight_covers_the_source_and_marks_what_was_dropped() -> None:
    source = "running late for a meeting with the VP of Engineering at 3pm"
    check = check_summary("user is late for a meeting", source)
    segments = highlight_source(source, check.dropped)
    assert "".join(text for text, _ in segments) == source
    assert [text for text, is_dropped in segments if is_dropped] == ["VP of Engineering", "3pm"]
    assert all(text for text, _ in segments)


def test_highlight_merges_overlapping_and_touching_spans() -> None:
    source = "abcdefghij"
    items = [
        DroppedItem("name", "bcd", 1, 4),
        DroppedItem("title", "cdef", 2, 6),
        DroppedItem("number", "gh", 6, 8),
    ]
    assert highlight_source(source, items) == [("a", False), ("bcdefgh", True), ("ij", False)]
    assert highlight_source(source, []) == [("abcdefghij", False)]
    assert highlight_source("", []) == []
    assert highlight_source("abc", [DroppedItem("name", "abc", 0, 3)]) == [("abc", True)]


def test_highlight_refuses_spans_outside_the_source() -> None:
    with pytest.raises(ValueError, match="outside the source"):
        highlight_source("short", [DroppedItem("name", "x", 3, 40)])


@pytest.mark.parametrize(
    "source",
    ["ab-" * 10_000 + "!", "1." * 10_000 + "x", "a." * 10_000 + "@", "a1" * 10_000, "word " * 20_000],
)
def test_long_hostile_text_is_checked_in_linear_time(source: str) -> None:
    # Memory content is attacker-controlled; an unanchored "[\w.-]+@" once
    # took 9 s on the first of these (30 kB). Linear code takes ~0.1 s.
    started = time.perf_counter()
    check_summary("n't " * 5_000, source)
    assert time.perf_counter() - started < 3.0


@pytest.mark.parametrize(
    "source",
    [
        "He lives on 4th St. now.",
        "The shop is on 3rd Ave. near the bridge.",
        "I'm sure I've said it, and I'll say it again.",
        "She called once or twice.",
    ],
)
def test_noise_is_not_reported_as_dropped(source: str) -> None:
    dropped = {(d.category, d.text) for d in check_summary("Nothing of note.", source).dropped}
    assert not {item for item in dropped if item[0] == "name"}
    assert ("number", "twice") not in dropped


def test_a_place_prefix_stays_with_its_name() -> None:
    dropped = {(d.category, d.text) for d in check_summary("Nothing.", "Go to St. Albans.").dropped}
    assert ("name", "St. Albans") in dropped


def test_real_numbers_next_to_frequency_words_are_still_reported() -> None:
    dropped = {
        (d.category, d.text)
        for d in check_summary("Take it daily.", "Take three tablets, twice a day.").dropped
    }
    assert ("number", "three") in dropped
