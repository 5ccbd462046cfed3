"""Codes and recorded values as people read them (governance.templatetags.labels)."""

from __future__ import annotations

from governance.rules.labels import VOCABULARIES, label_for
from governance.templatetags.labels import actor, label, label_text, readable


def test_every_known_code_has_a_label_and_a_definition_without_underscores() -> None:
    for vocabulary, codes in VOCABULARIES.items():
        for code, found in codes.items():
            assert found.text and found.definition, (vocabulary, code)
            assert "_" not in found.text and "_" not in found.definition, (vocabulary, code)


def test_a_code_renders_as_its_label_with_the_definition_on_hover() -> None:
    assert label("model_inference", "source") == (
        '<abbr title="Inferred by a language model, not stated by anyone.">Model&#x27;s guess</abbr>'
    )
    assert label_text("kind_not_allowed", "reason") == "Kind not allowed"


def test_an_unknown_code_still_reads_as_words_and_markup_in_it_stays_text() -> None:
    assert label_for("action", "agent_key.revoked").text == "Agent key revoked"
    assert label_text("<b>odd_code</b>", "nowhere") == "<b>odd code</b>"  # autoescaped by the template
    assert "<b>" not in str(label("instruction", "finding"))


def test_recorded_values_read_without_python_literals() -> None:
    assert readable(None) == "—"
    assert readable([]) == "none"
    assert readable({"from": 45, "to": 30}) == "45 → 30"
    assert readable({"confirm_days": {"from": 45, "to": 30}}) == "Re-confirm up to (days): 45 → 30"
    assert readable(True) == "yes"
    assert readable("2026-07-13 22:59:59.586649+00:00") == "2026-07-13 22:59"


def test_an_automatic_rule_is_not_shown_by_its_number() -> None:
    assert "R6" not in str(actor("rule:R6"))
    assert readable("rule:R6") == "an automatic rule"
    assert readable({"decided_by": "rule:R7"}).endswith(": an automatic rule")
    assert actor("user:riley") == "user:riley"
