"""governance.rules.erasure: pseudonyms, redaction of stored context, counts and receipts (issue 18)."""

from __future__ import annotations

from datetime import UTC, datetime

from governance.rules import erasure as rules

KEY = b"test-key"
CONTEXT = "\n".join(
    [
        "Remembered context (reference only).",
        "Returning user: continue where you left off; do not re-introduce yourself.",
        "Last session: Was choosing a new phone plan",
        "Project:",
        "- Support hours are 9 to 5 [SOURCE: docs | AUTHORITY: 5 | AGE: 1 days]",
        "About the user:",
        "- Prefers email over phone [SOURCE: chat:1 | AUTHORITY: 4 | AGE: 2 days]",
        "- Lives in Porto [SOURCE: chat:2 | AUTHORITY: 4 | AGE: 3 days]",
        "",
        "Relevant to this turn:",
        "- Asked about roaming in Spain [SOURCE: chat:3 | AUTHORITY: 2 | AGE: 0 days]",
        "- Roaming costs 2 EUR a day [SOURCE: docs | AUTHORITY: 5 | AGE: 9 days]",
    ]
)


def test_a_pseudonym_is_keyed_stable_and_recognised() -> None:
    first = rules.pseudonym("cust-1188", KEY)
    assert first == rules.pseudonym("cust-1188", KEY)
    assert first != rules.pseudonym("cust-1188", b"other-key") and first != rules.pseudonym("cust-1189", KEY)
    assert "1188" not in first
    assert rules.is_pseudonym(first) and rules.is_pseudonym(f"{first}-42")
    assert not rules.is_pseudonym("cust-1188") and not rules.is_pseudonym(f"{first}x")


def test_the_persons_section_and_hint_are_erased_and_project_lines_stay() -> None:
    redacted = rules.redact_person_section(CONTEXT).split("\n")

    assert redacted[2] == "Last session: [erased]"
    assert redacted[4] == CONTEXT.split("\n")[4]
    assert redacted[6:8] == ["- [erased]", "- [erased]"]
    # The per-round block mixes people and project: only lines quoting the person go (redact_lines).
    assert redacted[10:] == CONTEXT.split("\n")[10:]
    assert rules.redact_person_section("\n".join(redacted)) == "\n".join(redacted)


def test_lines_quoting_a_statement_go_whole_with_their_provenance_tag() -> None:
    redacted = rules.redact_lines(CONTEXT, ["Asked about roaming in Spain"]).split("\n")

    assert redacted[10] == "- [erased]"
    assert redacted[11] == CONTEXT.split("\n")[11]
    assert rules.redact_lines(CONTEXT, []) == CONTEXT


def test_an_id_is_replaced_only_where_it_stands_alone() -> None:
    text = "Request about cust-1 (not cust-10), see chat:bot/cust-1"
    assert rules.scrub_identifier(text, "cust-1", "P") == "Request about P (not cust-10), see chat:bot/P"


def test_counts_add_up_by_kind_and_label_for_people() -> None:
    one = rules.empty_counts()
    one["facts"]["preference"] = 2
    one["writes"] = 3
    total = rules.add_counts(one, {"facts": {"summary": 1}, "writes": 1, "resume_hints": 1})

    assert total["facts"]["preference"] == 2 and total["facts"]["summary"] == 1
    assert rules.total_items(total) == 8
    labels = [label for _, label, _ in rules.labelled(total)]
    assert "Preferences" in labels and "Project facts" not in labels
    assert not any("_" in label for label in labels)


def test_a_receipt_states_what_its_entry_states_and_names_each_difference() -> None:
    data = {"principal": "erased-x", "job": "j1", "counts": rules.empty_counts(), "tombstones": [3, 4]}
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    receipt = rules.receipt(
        project="acme",
        sequence=9,
        entry_hash="ab",
        actor="user:riley",
        reason="DP-1",
        recorded_at=when,
        data=data,
    )
    assert receipt["tombstones"] == [3, 4] and receipt["audit"]["sequence"] == 9
    assert receipt["erased_at"] == "2026-01-02T03:04:05.000000+00:00"
    assert rules.receipt_differences(receipt, dict(receipt)) == []
    assert rules.receipt_differences({**receipt, "tombstones": [3]}, receipt) == ["tombstones"]
