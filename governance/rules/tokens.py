"""Token counting with the real tokenizer (R11).

The budget is counted with tiktoken itself, so a count here is the count the
agent's model sees. Loading an encoding (files, caches, the environment) is
governance/tokenizer.py's business; this module only counts.
"""

from __future__ import annotations

from governance.tokenizer import get_encoding


def encode(text: str, encoding: str) -> list[int]:
    """Token ids of ``text`` as the model would see it.

    Memory text is attacker-controlled: a statement containing
    ``<|endoftext|>`` must be counted as the plain text it is, not rejected
    (tiktoken's default) nor turned into a special token.
    """
    return get_encoding(encoding).encode(text, allowed_special=set(), disallowed_special=())


def count_tokens(text: str, encoding: str) -> int:
    """Number of tokens in ``text`` under ``encoding`` (R11)."""
    if not text:
        return 0
    return len(encode(text, encoding))
