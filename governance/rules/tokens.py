"""Token counting with the real tokenizer (R11).

The budget is counted with tiktoken itself, so a count here is the count the
agent's model sees. Loading an encoding (files, caches, the environment) is
governance/tokenizer.py's business; this module only counts.
"""

from __future__ import annotations

import functools
import re

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


# --- A context's count from its lines --------------------------------------
#
# tiktoken cuts a text into pieces with its encoding's pattern, then encodes
# each piece on its own (byte-pair merges never cross a piece), so a text's
# count is the sum of its pieces' counts. Under both encodings a policy may
# name, no piece holds a line break followed by a character that is neither
# whitespace nor "/": the only alternatives that take a line break take
# whitespace, or punctuation followed by line breaks (and, in o200k_base,
# slashes). A piece boundary therefore falls after every line break followed
# by a letter or "-", and whatever comes after it does not change the pieces
# before it: the one alternative that looks ahead, and cl100k_base's end of
# text, apply only to a run of whitespace, which ends with that line break
# either way and is the same piece. Cut there, the parts' counts add up to
# the whole text's count, exactly. Every line of a rendered context begins
# with a letter or with "- " (rules/rendering.py), so a retrieval's packing,
# which counts the whole context again for every item it tries (R11), counts
# each line once per process instead of every line on every trial.
#
# The patterns the argument was made for, as tiktoken names them: an encoding
# whose pattern is anything else (a tiktoken upgrade) is counted whole.
_CUTTABLE_PATTERNS = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$"""
        r"""|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": (
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
        r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
        r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    ),
}
# After a line break, before an ASCII letter or "-": a piece boundary (see above).
_CUT = re.compile(r"(?<=\n)(?=[-A-Za-z])")


@functools.cache
def _cuttable(encoding: str) -> bool:
    pattern = getattr(get_encoding(encoding), "_pat_str", None)
    return pattern is not None and pattern == _CUTTABLE_PATTERNS.get(encoding)


@functools.lru_cache(maxsize=8192)
def _part_tokens(part: str, encoding: str) -> int:
    """Bounded: a part is one rendered line (a statement of at most a few thousand characters, a tag)."""
    return count_tokens(part, encoding)


def count_context_tokens(text: str, encoding: str) -> int:
    """``count_tokens(text, encoding)``, the same number, summed over the text's lines (see above)."""
    if not _cuttable(encoding):
        return count_tokens(text, encoding)
    return sum(_part_tokens(part, encoding) for part in _CUT.split(text))
