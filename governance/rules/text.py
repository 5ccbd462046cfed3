"""Text normalisation, keyed fingerprints and lexical similarity for statements.

Pure functions over strings. Two statements that a person would read as the
same assertion ("User prefers  Dark mode." and "user prefers dark mode")
normalise equal, so a tombstone (R8) or an earlier rejection (R5) cannot be
dodged with spacing, case, punctuation or invisible characters.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

# The longest statement the API and the console accept. Every check here is
# linear, and tests/governance/rules/test_linear_time.py holds them to 100 ms
# at this size.
MAX_STATEMENT_CHARS = 4_000

# U+200E/U+200F are bidi marks rather than zero-width spaces, but they render
# as nothing, so the write guard treats them with the zero-width family (R5).
ZERO_WIDTH_CHARS: frozenset[str] = frozenset("\u200b\u200c\u200d\u200e\u200f\u2060\ufeff")
BIDI_CONTROL_CHARS: frozenset[str] = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Invisible characters outside the Cf category that have been used to pad or
# hide text (soft hyphen is Cf, these are not).
_OTHER_INVISIBLE: frozenset[str] = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180e\u3164\uffa0")
# Unicode tag characters spell ASCII invisibly ("ASCII smuggling").
TAG_CHAR_RANGE = range(0xE0000, 0xE0080)


def is_hidden_char(ch: str) -> bool:
    """True for characters that render as nothing (or reorder what renders)."""
    if ch.isascii():
        # None of ASCII is hidden (no format characters, no tags); most text is ASCII.
        return False
    if ch in ZERO_WIDTH_CHARS or ch in BIDI_CONTROL_CHARS or ch in _OTHER_INVISIBLE:
        return True
    if ord(ch) in TAG_CHAR_RANGE:
        return True
    return unicodedata.category(ch) == "Cf"


def _is_variation_selector(ch: str) -> bool:
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def strip_hidden(text: str) -> str:
    """Remove every character for which :func:`is_hidden_char` holds."""
    return "".join(ch for ch in text if not is_hidden_char(ch))


# Letters of other scripts that render like Latin ones. Every value is one
# character so folding keeps string length: the guard maps match positions in
# the folded text back onto the text a reviewer sees.
_CONFUSABLES: dict[str, str] = {
    # Cyrillic (escaped: the point is that they look like Latin letters)
    "\u0430": "a",
    "\u0435": "e",
    "\u043e": "o",
    "\u0440": "p",
    "\u0441": "c",
    "\u0443": "y",
    "\u0445": "x",
    "\u0456": "i",
    "\u0458": "j",
    "\u0455": "s",
    "\u0501": "d",
    "\u051b": "q",
    "\u051d": "w",
    "\u04bb": "h",
    "\u04cf": "l",
    "\u0475": "v",
    "\u0433": "r",
    "\u043f": "n",
    "\u043a": "k",
    "\u043c": "m",
    "\u0442": "t",
    "\u043d": "h",
    "\u0410": "A",
    "\u0412": "B",
    "\u0415": "E",
    "\u041a": "K",
    "\u041c": "M",
    "\u041d": "H",
    "\u041e": "O",
    "\u0420": "P",
    "\u0421": "C",
    "\u0422": "T",
    "\u0423": "Y",
    "\u0425": "X",
    "\u0406": "I",
    "\u0408": "J",
    "\u0405": "S",
    "\u051a": "Q",
    "\u051c": "W",
    "\u04ae": "Y",
    "\u04c0": "I",
    # Greek
    "\u03b1": "a",
    "\u03b5": "e",
    "\u03b9": "i",
    "\u03ba": "k",
    "\u03bd": "v",
    "\u03bf": "o",
    "\u03c1": "p",
    "\u03c4": "t",
    "\u03c5": "u",
    "\u03c7": "x",
    "\u03f2": "c",
    "\u03f3": "j",
    "\u0391": "A",
    "\u0392": "B",
    "\u0395": "E",
    "\u0396": "Z",
    "\u0397": "H",
    "\u0399": "I",
    "\u039a": "K",
    "\u039c": "M",
    "\u039d": "N",
    "\u039f": "O",
    "\u03a1": "P",
    "\u03a4": "T",
    "\u03a5": "Y",
    "\u03a7": "X",
    "\u03f9": "C",
    # Armenian
    "\u0585": "o",
    "\u0578": "n",
    "\u057d": "u",
    "\u0570": "h",
    "\u0581": "g",
    "\u0566": "q",
    "\u0561": "w",
    "\u0555": "O",
    "\u054d": "U",
    # Latin letters that are not the ASCII ones they look like
    "\u0251": "a",
    "\u0261": "g",
    "\u026a": "i",
    "\u1d00": "a",
    "\u0131": "i",
    # Cherokee capitals
    "\u13aa": "A",
    "\u13a1": "R",
    "\u13b7": "M",
    "\u13ac": "E",
    "\u13a2": "T",
    "\u13da": "S",
    "\u13df": "C",
    "\u13bb": "H",
    "\u13e6": "K",
    "\u13de": "L",
    "\u13a0": "D",
    "\u13c0": "G",
    "\u13d9": "V",
    "\u13b3": "W",
    "\u13c3": "Z",
}
CONFUSABLE_CHARS: frozenset[str] = frozenset(_CONFUSABLES)
_CONFUSABLE_TABLE = str.maketrans(_CONFUSABLES)


def fold_confusables(text: str) -> str:
    """Replace Cyrillic/Greek look-alike letters with the Latin letter they imitate.

    Length-preserving. Used for matching only: folding a Russian sentence gives
    gibberish, which is harmless for comparison and never shown to anyone.
    """
    return text.translate(_CONFUSABLE_TABLE)


# Every write normalises its statement and those of the agent's recent writes
# (the burst check) and of the facts it may repeat; the same strings come back
# write after write, and walking them character by character was a fifth of a
# write's time. Statements up to this length are memoised (the functions are
# pure); longer ones, rare and up to MAX_STATEMENT_CHARS, are not, so the
# caches stay a few megabytes whatever an agent sends.
MEMOISED_CHARS = 512


def normalise_statement(statement: str) -> str:
    """Canonical form of a statement for equality: NFKC, no hidden characters,
    casefolded, single spaces, no trailing punctuation."""
    if len(statement) <= MEMOISED_CHARS:
        return _normalise_memoised(statement)
    return _normalise(statement)


@lru_cache(maxsize=8192)
def _normalise_memoised(statement: str) -> str:
    return _normalise(statement)


def _normalise(statement: str) -> str:
    # The same result as _folded, a few times faster, for ASCII (most statements,
    # and a write compares itself with up to a few hundred it may repeat): ASCII
    # is its own NFKC form, holds no hidden character or variation selector, and
    # casefolds to its lower case (tests/governance/rules/test_text.py).
    text = " ".join(statement.lower().split()) if statement.isascii() else _folded(statement)
    return _without_trailing_punctuation(text)


def _folded(statement: str) -> str:
    text = unicodedata.normalize("NFKC", statement)
    text = "".join(ch for ch in text if not is_hidden_char(ch) and not _is_variation_selector(ch))
    # Casefolding can produce sequences NFKC would compose differently
    # (e.g. some ligatures), so normalise again to keep one canonical form.
    text = unicodedata.normalize("NFKC", text.casefold())
    return " ".join(text.split())


def _without_trailing_punctuation(text: str) -> str:
    end = len(text)
    while end and (unicodedata.category(text[end - 1]).startswith("P") or text[end - 1].isspace()):
        end -= 1
    return text[:end]


def statement_fingerprint(statement: str, key: bytes) -> str:
    """HMAC-SHA256 (hex) of the normalised statement, keyed with the project secret.

    Tombstones keep only this hash (R8): without the key, a dictionary of
    likely statements cannot be hashed to find out what was withdrawn.
    Look-alike letters are folded first so "admin" spelled with a Cyrillic a
    (U+0430) still matches a tombstone or rejection of "admin" (R5).
    """
    if not key:
        raise ValueError("fingerprint key must not be empty: an unkeyed hash can be reversed")
    canonical = normalise_statement(fold_confusables(unicodedata.normalize("NFKC", statement)))
    return hmac.new(key, canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def clear_caches() -> None:
    """Forget memoised normalisation (benchmarks measure cold calls)."""
    _normalise_memoised.cache_clear()
    _lexical_memoised.cache_clear()


def keyed_digest(text: str, key: bytes) -> str:
    """HMAC-SHA256 (hex), keyed with the tombstone key, over the SHA-256 of ``text`` as written.

    The digest kept in place of erasable text (R8: a kept digest of erased text
    is keyed). Unlike :func:`statement_fingerprint` it is exact, not
    normalised: it identifies one version of a text, not an assertion. Keying
    the SHA-256 rather than the text itself is what lets
    :func:`rekey_plain_digest` re-key digests stored before they were keyed,
    including those of statements already erased, which have no text left to
    hash; without the key, a guessed statement still cannot be confirmed.
    """
    return rekey_plain_digest(hashlib.sha256(text.encode("utf-8")).hexdigest(), key)


def rekey_plain_digest(plain_hex: str, key: bytes) -> str:
    """The keyed digest of a text, from the unkeyed SHA-256 hex digest stored for it earlier."""
    if not key:
        raise ValueError("digest key must not be empty: an unkeyed hash of erased text can be confirmed")
    return hmac.new(key, bytes.fromhex(plain_hex), hashlib.sha256).hexdigest()


_TOKEN = re.compile(r"\w+(?:['\u2019.\-]\w+)*")
_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "without"}
)


def _tokens(normalised: str) -> set[str]:
    return set(_TOKEN.findall(normalised))


def _shingles(normalised: str, size: int = 3) -> set[str]:
    padded = f" {normalised} "
    if len(padded) <= size:
        return {padded}
    return {padded[i : i + size] for i in range(len(padded) - size + 1)}


def _dice(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return 2 * len(a & b) / (len(a) + len(b))


def similarity(a: str, b: str) -> float:
    """Lexical similarity in [0, 1] of two statements after normalisation.

    The higher of token-set and character-trigram Dice: the first ignores word
    order, the second tolerates small edits inside words. No embeddings, so it
    is cheap enough to run against every recent write of an agent.
    """
    return Lexical.of(a).similarity(Lexical.of(b))


@dataclass(frozen=True)
class Lexical:
    """A statement prepared once for many comparisons (``similarity``, ``near_duplicate``).

    Normalising and cutting into tokens and trigrams is most of a comparison's
    cost; a page that compares 25 statements with 300 facts each, or a write
    compared with the facts it may repeat, prepares every text once. Prepared
    forms of statements up to MEMOISED_CHARS are memoised like
    ``normalise_statement``, for the same reason.
    """

    normalised: str
    tokens: frozenset[str]
    shingles: frozenset[str]
    numbers: frozenset[str]
    negated: bool

    @classmethod
    def of(cls, statement: str) -> Lexical:
        return cls.of_normalised(normalise_statement(statement))

    @classmethod
    def of_normalised(cls, normalised: str) -> Lexical:
        if len(normalised) <= MEMOISED_CHARS:
            return _lexical_memoised(normalised)
        return _lexical(normalised)

    def similarity(self, other: Lexical) -> float:
        if self.normalised == other.normalised:
            return 1.0
        if not self.normalised or not other.normalised:
            return 0.0
        return max(_dice(self.tokens, other.tokens), _dice(self.shingles, other.shingles))

    def near_duplicate(self, other: Lexical, threshold: float = 0.9) -> bool:
        """``near_duplicate`` of the two statements, for a caller comparing one with many."""
        if self.normalised == other.normalised:
            return True
        if self.numbers != other.numbers or self.negated != other.negated:
            return False
        return self.similarity(other) >= threshold


# From this many statements compared with a pool on, it compares them by bits (LexicalPool).
BITS_FROM_USES = 4


class LexicalPool:
    """Statements one page compares others with: ``similarities(s)`` is
    ``[s.similarity(p) for p in pool]``, the same numbers.

    A pool compared with many statements (``uses``) keeps each of its
    statements' tokens and trigrams as bits of one integer over the pool's
    own vocabulary, so the size of an intersection is the popcount of an AND
    rather than a walk over a set of fifty strings: ~0.3 against ~2 µs a
    comparison on this machine. The bits cost about as much to build as four
    comparisons of sets (~9 µs a statement), so a pool used fewer times than
    BITS_FROM_USES compares sets. The review queue compares each write on a
    page with up to 300 of its person's facts: for a page of one person's 25
    writes, ~16 ms of sets against ~5 ms of bits (issue 13).
    """

    def __init__(self, pool: Sequence[Lexical], *, uses: int) -> None:
        self._pool = tuple(pool)
        # The pool's vocabulary: each word and trigram's bit.
        self._token_bit: dict[str, int] = {}
        self._shingle_bit: dict[str, int] = {}
        # (normalised, token bits, token count, trigram bits, trigram count) per statement.
        self._bits: list[tuple[str, int, int, int, int]] | None = None
        if uses >= BITS_FROM_USES:
            self._bits = [
                (
                    p.normalised,
                    _bits(p.tokens, self._token_bit, grow=True),
                    len(p.tokens),
                    _bits(p.shingles, self._shingle_bit, grow=True),
                    len(p.shingles),
                )
                for p in self._pool
            ]

    def similarities(self, statement: Lexical) -> list[float]:
        if self._bits is None:
            return [statement.similarity(p) for p in self._pool]
        normalised = statement.normalised
        if not normalised:
            return [1.0 if not text else 0.0 for text, *_ in self._bits]
        # Words and trigrams the pool never uses cannot be shared; they still count in the sizes.
        tokens, token_count = _bits(statement.tokens, self._token_bit, grow=False), len(statement.tokens)
        shingles, shingle_count = (
            _bits(statement.shingles, self._shingle_bit, grow=False),
            len(statement.shingles),
        )
        scores = []
        for text, their_tokens, their_token_count, their_shingles, their_shingle_count in self._bits:
            if text == normalised:
                scores.append(1.0)
            elif not text:
                scores.append(0.0)
            else:
                # _dice of the tokens, then of the trigrams, written out: this loop is the page's cost.
                counts = token_count + their_token_count
                by_tokens = 2 * (tokens & their_tokens).bit_count() / counts if counts else 1.0
                # A statement that is not empty has at least one trigram.
                by_shingles = (
                    2 * (shingles & their_shingles).bit_count() / (shingle_count + their_shingle_count)
                )
                scores.append(by_tokens if by_tokens > by_shingles else by_shingles)
        return scores


def _bits(items: frozenset[str], index: dict[str, int], *, grow: bool) -> int:
    """``items`` as bits over ``index`` (word -> bit), which ``grow`` extends with new words."""
    mask = 0
    for item in items:
        bit = index.get(item)
        if bit is None:
            if not grow:
                continue
            bit = index[item] = len(index)
        mask |= 1 << bit
    return mask


@lru_cache(maxsize=4096)
def _lexical_memoised(normalised: str) -> Lexical:
    return _lexical(normalised)


def _lexical(normalised: str) -> Lexical:
    tokens = _tokens(normalised)
    return Lexical(
        normalised,
        tokens=frozenset(tokens),
        shingles=frozenset(_shingles(normalised)),
        # An ASCII text without a digit has no number (the usual case), found in one scan.
        numbers=frozenset(_numbers(tokens))
        if not normalised.isascii() or _ASCII_DIGIT.search(normalised)
        else frozenset(),
        negated=_is_negated(tokens),
    )


_ASCII_DIGIT = re.compile(r"[0-9]")


def _numbers(tokens: set[str]) -> set[str]:
    return {t for t in tokens if (_ASCII_DIGIT.search(t) if t.isascii() else any(ch.isdigit() for ch in t))}


def _is_negated(tokens: set[str]) -> bool:
    return any(t in _NEGATIONS or t.endswith(("n't", "n\u2019t")) for t in tokens)


def near_duplicate(a: str, b: str, threshold: float = 0.9) -> bool:
    """True when ``a`` and ``b`` make the same assertion in nearly the same words.

    Lexical similarity alone would call "region is eu-west-1" and "region is
    eu-west-2", or "is an admin" and "is not an admin", near duplicates; those
    are different claims, so differing numbers or negation rule it out.
    """
    return Lexical.of(a).near_duplicate(Lexical.of(b), threshold)


# --- Lexical signatures: which stored statements can be near-duplicates of a new one ---
#
# A write compares its statement with up to a few hundred of the principal's
# facts (``near_duplicate``), and preparing each of them (``Lexical``) was most of
# a write's own work when they were not in this process's memo (issue 13). The
# facts keep a signature of their statement, computed when it is stored, from
# which the database leaves out the facts that cannot be near-duplicates; the
# rest are compared as before, so the answer is the same.
#
# Two statements are near-duplicates only if they normalise equal, or have the
# same numbers and negation and a token or trigram Dice of at least the
# threshold, for which the sets' sizes must be close: Dice(A, B) =
# 2|A & B| / (|A| + |B|) <= 2 min / (|A| + |B|). The signature is one bigint:
#
#   bits  0-29  a hash of the numbers (equal numbers, equal hash)
#   bit   30    negated
#   bits 31-43  the trigram set's size
#   bits 44-55  the token set's size
#   bits 56-62  LEXICAL_VERSION; 0 for a fact stored without one
#
# A fact with another version (rules changed since it was stored) or none is
# always compared, so a change to the rules above never hides a duplicate:
# bump LEXICAL_VERSION with any change to normalisation, tokens or trigrams.

LEXICAL_VERSION = 1
NUMBERS_BITS = 30
NEGATED_BIT = 30
SHINGLES_SHIFT, SHINGLES_MAX = 31, (1 << 13) - 1
TOKENS_SHIFT, TOKENS_MAX = 44, (1 << 12) - 1
VERSION_SHIFT = 56
# Numbers and negation, which must be equal.
EXACT_MASK = (1 << (NEGATED_BIT + 1)) - 1


def lexical_signature(statement: str, key: bytes) -> int:
    """The signature a fact keeps of ``statement`` (0, compared always, when it does not fit).

    The numbers' hash is keyed (the tombstone key): the numbers of a statement
    can be a phone or an account number, and a kept digest of text that may be
    erased must not confirm a guess without the key (R8). Withdrawal clears it.
    """
    prepared = Lexical.of(statement)
    tokens, shingles = len(prepared.tokens), len(prepared.shingles)
    if tokens > TOKENS_MAX or shingles > SHINGLES_MAX:
        return 0
    return (
        (LEXICAL_VERSION << VERSION_SHIFT)
        | (tokens << TOKENS_SHIFT)
        | (shingles << SHINGLES_SHIFT)
        | (int(prepared.negated) << NEGATED_BIT)
        | _numbers_hash(prepared.numbers, key)
    )


def _numbers_hash(numbers: frozenset[str], key: bytes) -> int:
    if not key:
        raise ValueError(
            "signature key must not be empty: an unkeyed hash of erasable numbers can be confirmed"
        )
    digest = hmac.new(key, "\x00".join(sorted(numbers)).encode("utf-8"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << NUMBERS_BITS) - 1)


@dataclass(frozen=True)
class NearDuplicateFilter:
    """Which signatures may belong to a near-duplicate of one statement (``near_duplicates_of``)."""

    version: int
    exact: int  # numbers and negation, as EXACT_MASK selects them
    tokens: tuple[int, int]  # inclusive range of token-set sizes
    shingles: tuple[int, int]  # inclusive range of trigram-set sizes

    def admits(self, signature: int) -> bool:
        if self.version == 0 or signature >> VERSION_SHIFT != self.version:
            return True
        if signature & EXACT_MASK != self.exact:
            return False
        tokens = (signature >> TOKENS_SHIFT) & TOKENS_MAX
        shingles = (signature >> SHINGLES_SHIFT) & SHINGLES_MAX
        return self.tokens[0] <= tokens <= self.tokens[1] or self.shingles[0] <= shingles <= self.shingles[1]


def near_duplicates_of(statement: str, key: bytes, threshold: float = 0.9) -> NearDuplicateFilter:
    """The signatures ``near_duplicate(statement, other, threshold)`` can be true for, at least
    (signatures made with the same ``key``)."""
    signature = lexical_signature(statement, key)
    return NearDuplicateFilter(
        version=signature >> VERSION_SHIFT,
        exact=signature & EXACT_MASK,
        tokens=_sizes_within(threshold, (signature >> TOKENS_SHIFT) & TOKENS_MAX),
        shingles=_sizes_within(threshold, (signature >> SHINGLES_SHIFT) & SHINGLES_MAX),
    )


def _sizes_within(threshold: float, size: int) -> tuple[int, int]:
    """Sizes b of another set with 2 min(a, b) / (a + b) >= threshold for a = ``size``.

    Widened by one each way, so floating point never decides a boundary."""
    if threshold <= 0:
        return 0, TOKENS_MAX + SHINGLES_MAX
    ratio = threshold / (2 - threshold)
    return max(0, math.floor(size * ratio) - 1), math.ceil(size / ratio) + 1
