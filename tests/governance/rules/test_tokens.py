"""The budget is counted with the real tokenizer (R11); loading it: tests/governance/test_tokenizer.py."""

from __future__ import annotations

import bpe_openai
import pytest

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
