"""The budget is counted with the real tokenizer (R11); loading it: tests/governance/test_tokenizer.py."""

from __future__ import annotations

import bpe_openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance import tokenizer
from governance.rules import tokens
from governance.rules.policy import ENCODINGS

SAMPLES = [
    "hello world",
    "Remembered context (reference only). The current conversation is authoritative.",
    "- Prefers British English [SOURCE: chat:412 | AUTHORITY: 4 | AGE: 3 days]",
    "Déploiement à eu-west-2, 東京リージョン, emoji 🚀🧠, tabs\tand\nnewlines\r\n",
    "    indented code = {'key': [1, 2, 3]}  # trailing spaces   ",
    "1234567890 3.14159 2025-06-01T12:00:00Z",
]


def test_hello_world_has_the_published_ids() -> None:
    assert tokens.encode("hello world", "cl100k_base") == [15339, 1917]
    assert tokens.encode("hello world", "o200k_base") == [24912, 2375]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("text", SAMPLES)
def test_ids_match_an_independent_implementation(encoding: str, text: str) -> None:
    # bpe-openai is a separate Rust tokenizer: agreeing with it shows the
    # materialised files are the real vocabularies, not merely loadable ones.
    assert tokens.encode(text, encoding) == bpe_openai.get_encoding(encoding).encode(text)
    assert tokens.count_tokens(text, encoding) == len(bpe_openai.get_encoding(encoding).encode(text))


def test_encodings_differ_so_the_policy_choice_matters() -> None:
    text = SAMPLES[3]
    assert tokens.encode(text, "cl100k_base") != tokens.encode(text, "o200k_base")


def test_empty_text_is_zero_tokens() -> None:
    assert tokens.count_tokens("", "o200k_base") == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_special_token_text_in_a_statement_counts_as_plain_text(encoding: str) -> None:
    # Statements are attacker-controlled: tiktoken's default would raise on
    # this text, and allowing it would count one special token.
    ids = tokens.encode("<|endoftext|>", encoding)
    assert len(ids) > 1
    assert tokenizer.get_encoding(encoding).eot_token not in ids
    assert tokens.count_tokens("<|endoftext|>", encoding) == len(ids)


# Pieces of text that sit at or near tiktoken's piece boundaries: line breaks
# after punctuation, whitespace and letters, slashes and blanks after a break
# (where a piece may run on), contractions, numbers, marks and other scripts.
_FRAGMENTS = [
    *"\n\n\n   \t\r/-]['\"sdtm.,:;!?()|_1a",
    *("ab", "XY", "é", "ß", "東京", "\u0301", "\u00a0", "\u2028", "\u3000", "🚀", "23", "ll", "ve"),
    *("'s", "'re", "\x0b", "\x0c", "\x85", "<|endoftext|>", "days]", "- ", "\n- ", "\nA", "\n/", "\n "),
    *(" \n", "]\n", "a\n", "\n\n"),
]


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(_FRAGMENTS), max_size=40))
def test_a_context_is_counted_as_the_whole_text_would_be(encoding: str, parts: list[str]) -> None:
    text = "".join(parts)
    assert tokens.count_context_tokens(text, encoding) == tokens.count_tokens(text, encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_rendered_context_is_counted_exactly(encoding: str) -> None:
    lines = [
        "Remembered context (reference only). The current conversation is authoritative.",
        "Returning user: continue where you left off; do not re-introduce yourself.",
        "Project:",
        "- Deploy to eu-west-2 [SOURCE: config:deploy | AUTHORITY: 5 | AGE: 0 days]",
        "- Previously mentioned (please re-confirm): /usr/bin  ends   here/ "
        "[SOURCE: a/b | AUTHORITY: 2 | AGE: 9 days]",
        "About the user:",
        "- Prefers 東京リージョン 🚀 and <|endoftext|> [SOURCE: chat:412 | AUTHORITY: 4 | AGE: 3 days]",
    ]
    round_block = "Relevant to this turn:\n- It's 10:30 [SOURCE: x | AUTHORITY: 3 | AGE: 1 days]"
    text = "\n".join(lines) + "\n\n" + round_block
    assert tokens.count_context_tokens(text, encoding) == tokens.count_tokens(text, encoding)


def test_an_encoding_whose_pattern_changed_is_counted_whole() -> None:
    # The cut is proven for the patterns tiktoken has today; another (an upgrade) is not cut.
    text = "Project:\n- one [SOURCE: a | AUTHORITY: 5 | AGE: 0 days]\n- two"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(tokens._CUTTABLE_PATTERNS, "o200k_base", "something else")
        tokens._cuttable.cache_clear()
        try:
            assert not tokens._cuttable("o200k_base")
            assert tokens.count_context_tokens(text, "o200k_base") == tokens.count_tokens(text, "o200k_base")
        finally:
            tokens._cuttable.cache_clear()
    assert tokens._cuttable("o200k_base")
