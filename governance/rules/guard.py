"""The write guard (R5): what a proposed memory write must pass before it is memory.

Pure functions over plain data; the service that records writes gathers the
context (earlier rejections, tombstones, the agent's recent writes) and calls
:func:`check_write`. Each check returns findings written for a trust-and-safety
reviewer, quoting the offending fragment, and the combination decides the
outcome:

- ``rejected``: the write asked for more authority than its source allows (R4),
  or nothing visible is left once hidden characters and markup are removed.
  The write is recorded but never becomes memory.
- ``quarantined``: any other high-severity finding; waits for a human.
- ``pending_review``: any finding at all, or authority below the policy's
  ``auto_approve_min_authority``.
- ``active``: none of the above.

Memory content is attacker-controlled text that will later be injected into a
model's context and rendered in the console, so the checks look for what would
steer the model (instructions, role tags, hidden or encoded text, look-alike
letters), what would act in a browser (markup, htmx attributes, event handlers,
script URLs), what would leak data (exfiltration-shaped links), and what would
re-learn something a person had removed (tombstones, earlier rejections).
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from urllib.parse import parse_qsl, unquote, urlsplit

from governance.rules.text import (
    CONFUSABLE_CHARS,
    TAG_CHAR_RANGE,
    fold_confusables,
    is_hidden_char,
    near_duplicate,
    normalise_statement,
    statement_fingerprint,
    strip_hidden,
)

SEVERITIES: tuple[str, ...] = ("low", "medium", "high")
OUTCOMES: tuple[str, ...] = ("active", "pending_review", "quarantined", "rejected")

# Read-only so a project's tuning (a copy with overrides) can never leak into
# every other project through the shared default.
DEFAULT_SOURCE_CAPS: Mapping[str, int] = MappingProxyType(
    {
        "config": 5,
        "documentation": 5,
        "reviewer": 5,
        "user_statement": 4,
        "support_ticket": 4,
        "tool_output": 3,
        "chat_message": 2,
        "model_inference": 2,
        "summarizer": 2,
        "web_page": 1,
    }
)
DIRECT_EVIDENCE: frozenset[str] = frozenset({"user_statement", "config", "reviewer"})

CHECK_NAMES: tuple[str, ...] = (
    "empty_statement",
    "authority_cap",
    "source_trust",
    "instruction",
    "markup",
    "hidden_text",
    "encoded_payload",
    "homoglyph",
    "exfiltration_link",
    "reviewer_address",
    "resubmitted_rejected",
    "tombstoned",
    "derived_from_retrieval",
    "write_back_amplification",
    "burst",
    "contradicts_verified",
)
# Findings that mean someone may be injecting or poisoning memory, as opposed
# to findings about trust level (source_trust, authority_cap, derived, a
# conflict with a verified fact) that only ask a human to confirm.
INJECTION_CHECKS: frozenset[str] = frozenset(
    {
        "empty_statement",
        "instruction",
        "markup",
        "hidden_text",
        "encoded_payload",
        "homoglyph",
        "exfiltration_link",
        "reviewer_address",
        "resubmitted_rejected",
        "tombstoned",
        "write_back_amplification",
        "burst",
    }
)
# R4: self-promotion is refused outright rather than left for a reviewer, who
# could otherwise approve the inflated authority by accident.
REJECTING_CHECKS: frozenset[str] = frozenset({"authority_cap", "empty_statement"})

AMPLIFICATION_LIMIT = 5  # derived writes per agent per hour before R16 amplification
BURST_MIN_DUPLICATES = 3  # near-duplicates among the agent's recent writes
UNKNOWN_SOURCE_CAP = 1
DETAIL_QUOTE_CHARS = 80


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    detail: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "severity": self.severity, "detail": self.detail}


@dataclass(frozen=True)
class WriteProposal:
    statement: str
    kind: str
    key: str | None
    has_principal: bool
    source_type: str
    source_ref: str
    requested_authority: int | None
    derived_from_retrieval: bool = False
    derived_max_authority: int | None = None

    def __post_init__(self) -> None:
        for name in ("requested_authority", "derived_max_authority"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= 5:
                raise ValueError(f"{name} must be between 1 and 5, not {value}")


@dataclass(frozen=True)
class GuardContext:
    source_caps: Mapping[str, int]
    fingerprint_key: bytes
    rejected_fingerprints: frozenset[str] = frozenset()
    tombstones: Mapping[str, str] = field(default_factory=dict)
    recent_agent_statements: Sequence[str] = ()
    recent_derived_writes: int = 0
    verified_statement_for_key: str | None = None


@dataclass(frozen=True)
class GuardResult:
    authority: int
    findings: tuple[Finding, ...]
    outcome: str

    @property
    def flagged_for_injection(self) -> bool:
        """Held because of suspected injection, not merely low authority."""
        return any(f.check in INJECTION_CHECKS for f in self.findings)


Check = Callable[[WriteProposal, GuardContext], list[Finding]]


# --- shared helpers ---------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    clean: str  # NFKC without hidden characters: what a reviewer actually reads
    skeleton: str  # clean with look-alike letters folded to Latin; same length


@lru_cache(maxsize=512)
def _text(statement: str) -> _Text:
    clean = strip_hidden(unicodedata.normalize("NFKC", statement))
    return _Text(clean=clean, skeleton=fold_confusables(clean))


def _show(fragment: str) -> str:
    """Quote a fragment for a reviewer: hidden characters made visible, one line, short."""
    visible = "".join(f"<U+{ord(ch):04X}>" if is_hidden_char(ch) else ch for ch in fragment)
    visible = " ".join(visible.split())
    if len(visible) > DETAIL_QUOTE_CHARS:
        visible = visible[: DETAIL_QUOTE_CHARS - 3] + "..."
    return f'"{visible}"'


def _char_label(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed character')}"


@dataclass(frozen=True)
class _Pattern:
    reason: str
    regex: re.Pattern[str]
    # R5: "a user's own first-person preference is not an injection". Soft
    # patterns catch how-to-talk-to-me directives, which are legitimate from
    # direct evidence (the person, config, a reviewer) and suspicious from any
    # other source.
    soft: bool = False


def _p(reason: str, pattern: str, *, soft: bool = False) -> _Pattern:
    return _Pattern(reason, re.compile(pattern, re.IGNORECASE), soft)


def _hits(patterns: Sequence[_Pattern], text: str) -> list[tuple[_Pattern, re.Match[str]]]:
    found = []
    for pattern in patterns:
        match = pattern.regex.search(text)
        if match:
            found.append((pattern, match))
    return found


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


_QUOTED = re.compile(
    r"\"[^\"\n]{1,160}\"|\u201c[^\u201d\n]{1,160}\u201d|\u2018[^\u2019\n]{1,160}\u2019"
    r"|(?<!\w)'[^'\n]{1,160}'(?!\w)|`[^`\n]{1,160}`"
)
_MENTION_WORDS = re.compile(
    r"\b(?:phrases?|strings?|text|wording|patterns?|keywords?|terms?|regex\w*|signatures?"
    r"|attacks?|injections?|payloads?|examples?|quoted|detect\w*|logs?|filter\w*|block\w*"
    r"|classif\w*)\b",
    re.IGNORECASE,
)


def _mask_mentions(text: str) -> str:
    """Blank short quoted spans that the rest of the sentence talks *about*.

    "how to detect the phrase 'ignore previous instructions' in logs" quotes an
    attack to discuss it; that is not an instruction. Only short quotes inside a
    real sentence with a word like "phrase" or "detect" qualify, so wrapping a
    whole payload in quotes does not hide it.
    """
    spans = [m.span() for m in _QUOTED.finditer(text)]
    if not spans:
        return text
    outside = text
    for start, end in spans:
        outside = _blank(outside, start, end)
    if len(outside.split()) < 6 or not _MENTION_WORDS.search(outside):
        return text
    masked = text
    for start, end in spans:
        if len(text[start:end].split()) <= 8:
            masked = _blank(masked, start, end)
    return masked


def source_cap(source_type: str, caps: Mapping[str, int]) -> int:
    """Highest authority a source type may carry (R4); unknown sources get the lowest."""
    return caps.get(source_type, UNKNOWN_SOURCE_CAP)


def resolve_authority(proposal: WriteProposal, context: GuardContext) -> int:
    """The authority the fact will carry: requested (or the source's cap), never
    above the source's cap (R4) nor, for derived writes, above what it was
    derived from (R16)."""
    cap = source_cap(proposal.source_type, context.source_caps)
    requested = proposal.requested_authority
    authority = cap if requested is None else min(requested, cap)
    if proposal.derived_from_retrieval:
        # R16: a derived write whose origin is unknown cannot borrow any authority.
        origin = proposal.derived_max_authority
        authority = min(authority, origin if origin is not None else UNKNOWN_SOURCE_CAP)
    return max(authority, 1)


# --- visible content ----------------------------------------------------------

_MARKUP_TO_STRIP = re.compile(
    r"<!--[\s\S]*?(?:-->|$)|<[^<>]*>|<\|[^|<>]*\|>|\[/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>",
    re.IGNORECASE,
)


def check_visible_content(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    visible = _MARKUP_TO_STRIP.sub("", _text(proposal.statement).clean).strip()
    if visible:
        return []
    if not proposal.statement.strip():
        detail = "The statement is empty."
    else:
        detail = (
            "Nothing visible remains once hidden characters and markup are removed: "
            f"{_show(proposal.statement)}"
        )
    return [Finding("empty_statement", "high", detail)]


# --- authority and source trust (R4) ----------------------------------------


def check_authority_cap(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    requested = proposal.requested_authority
    cap = source_cap(proposal.source_type, context.source_caps)
    if requested is None or requested <= cap:
        return []
    return [
        Finding(
            "authority_cap",
            "high",
            f"Requested authority {requested} is above the maximum of {cap} for "
            f"{proposal.source_type} sources. A write cannot promote itself; only a "
            "reviewer can raise authority (R4).",
        )
    ]


_PERSONAL_KINDS = frozenset({"profile", "preference"})
_INFERRED_SOURCES = frozenset({"model_inference", "summarizer"})


def check_source_trust(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    source = proposal.source_type
    if source not in context.source_caps:
        return [
            Finding(
                "source_trust",
                "high",
                f"Unknown source type {source!r}: nobody has said how far it can be trusted, "
                f"so it is treated as authority {UNKNOWN_SOURCE_CAP}.",
            )
        ]
    cap = context.source_caps[source]
    if source == "web_page" or cap <= 1:
        return [
            Finding(
                "source_trust",
                "medium",
                f"Comes from a low-trust source ({source}, maximum authority {cap}): anyone can "
                "publish such content, including instructions planted for assistants.",
            )
        ]
    if source in _INFERRED_SOURCES and proposal.kind in _PERSONAL_KINDS:
        return [
            Finding(
                "source_trust",
                "low",
                f"A {proposal.kind} fact about a person that a model guessed ({source}) rather "
                "than something the person said; confirm it before relying on it.",
            )
        ]
    return []


# --- instructions aimed at the assistant --------------------------------------

# Where an imperative can start: beginning of text, after sentence punctuation,
# an opening quote/bracket, a comma, or a connective ("... and always recommend").
_CLAUSE_START = (
    r"(?:^|[.!?;:\n\"(\[]\s*|,\s*|\b(?:and|then|so|please|also|just|now|but)\s+)"
    r"(?:you\s+)?(?:(?:must|should|shall|will|need\s+to|have\s+to)\s+)?"
)
_IMPERATIVE_START = _CLAUSE_START + r"(?:always|never|only|exclusively)\s+(?:ever\s+)?"
# "Always recommend X" pushes something on everyone; "never suggest nuts" is
# more often a person's own restriction, so only the positive form is hard.
_PROMOTING_START = _CLAUSE_START + r"(?:always|only|exclusively)\s+(?:ever\s+)?"
_PROMOTE = (
    r"(?:recommend|suggest|promote|endorse|advertise|upsell|praise|link\s+to"
    r"|(?:direct|refer|steer|send)\s+\w+\s+to"
    r"|tell\s+(?:the\s+)?(?:users?|customers?|people|everyone|visitors?|them)|say\s+that)\b"
)
_BEHAVE = (
    r"(?:answer|reply|respond|speak|talk|greet|say|ask|refuse|agree|pretend|act|behave|treat"
    r"|mention|favou?r|prioriti[sz]e"
    r"|(?:call|address)\s+(?:me|the\s+user|users?|them|him|her)"
    r"|use\s+(?:the\s+|my\s+)?(?:name|nickname|title|language|tone|persona)"
    r"|(?:sign\s+off|end|start|begin)\s+(?:every|each|all|your)"
    r"|(?:include|add|append)\s+(?:\S+\s+){0,4}?(?:in|to|at\s+the\s+end\s+of)\s+"
    r"(?:every|each|all|your)\s+(?:answers?|repl(?:y|ies)|responses?|messages?|outputs?))\b"
)
_PRIVILEGED_ROLE = (
    r"(?:admin(?:istrator)?s?|super\s*-?\s*users?|root|owners?|moderators?|sudoers?"
    r"|staff\s+members?|privileged|vips?)"
)
_ASSISTANT = r"(?:ai|a\.i\.|assistants?|llms?|language\s+models?|chatbots?|gpt|chatgpt|claude|copilot)"
_TRIGGER_START = (
    r"\b(?:when(?:ever)?|once|if|after|as\s+soon\s+as|(?:the\s+)?next\s+time)\s+"
    r"(?:the\s+|this\s+|a\s+)?(?:user|they|he|she|customer|person|principal|someone|anyone"
    r"|visitor|caller|client)\s+(?:next\s+|later\s+|again\s+|ever\s+|first\s+)?"
    r"(?:says?|types?|writes?|asks?|repl(?:y|ies)|responds?|mentions?|confirms?|agrees?"
    r"|clicks?|enters?|sends?|logs?\s+(?:in|on)|returns?|comes\s+back|opens?|visits?)\b"
    r"[^.!?\n]{0,100}?"
)

_INSTRUCTION_PATTERNS: tuple[_Pattern, ...] = (
    _p(
        "tries to override earlier instructions",
        r"\b(?:ignore|disregard|forget|override|bypass|overrule)\s+(?:\w+\s+){0,2}?"
        r"(?:all|any|previous|prior|above|earlier|preceding|your|system|safety|original"
        r"|initial|existing|these|those)\s+(?:\w+\s+){0,2}?(?:instructions?|rules|guidelines"
        r"|prompts?|directives?|guardrails?|polic(?:y|ies)|constraints|restrictions"
        r"|programming|context|commands?)\b",
    ),
    _p("talks about the system prompt", r"\bsystem\s+(?:prompt|message|instructions?|override)\b"),
    _p(
        "tries to switch the assistant's mode or persona",
        r"\b(?:god|dan|jailbreak|unrestricted|unfiltered)\s+mode\b|\bjailbreak\w*"
        r"|\b(?:enter|activate|switch\s+(?:in)?to)\s+developer\s+mode\b"
        r"|\byou\s+are\s+(?:now|no\s+longer)\b"
        r"|\bnew\s+(?:system\s+)?(?:instructions?|rules|persona|directives?)\s*[:\-]"
        r"|\bpretend\s+(?:to\s+be|(?:that\s+)?you\s+(?:are|have))\b"
        r"|\b(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:are|were|have)\b"
        r"|an?\s+(?:unrestricted|unfiltered|different|new)\b|dan\b)",
    ),
    _p(
        "plants a delayed trigger",
        _TRIGGER_START + r"\b(?:save|store|remember|record|set|mark|grant|assign|make|upgrade"
        r"|elevate|promote|recommend|suggest|reveal|send|email|forward|run|execute|write|add"
        r"|update|give|treat|consider)\b",
    ),
    _p(
        "asks to store or grant elevated roles or permissions",
        r"\b(?:save|store|remember|record|note\s+down|mark|set|write\s+down|log|flag|register"
        r"|treat|consider|list)\b[^.!?\n]{0,50}?\b(?:is|are|am|as|be|being|has|have|with)\s+"
        rf"(?:an?\s+|the\s+)?(?:\w+\s+){{0,2}}?{_PRIVILEGED_ROLE}\b"
        r"|\b(?:grant|give|assign|elevate|escalate|upgrade|promote)\b[^.!?\n]{0,40}?"
        r"\b(?:admin(?:istrator)?|super\s*-?\s*user|root|owner|moderator|sudo)\s*"
        r"(?:role|rights|access|privileges?|permissions?|status|account)\b"
        r"|\b(?:promote|elevate|upgrade|escalate)\b[^.!?\n]{0,30}?\bto\s+(?:an?\s+)?"
        r"(?:admin(?:istrator)?|super\s*-?\s*user|root|owner|moderator)\b"
        r"|\b(?:grant|give)\b[^.!?\n]{0,30}?\b(?:full|elevated|unrestricted|root"
        r"|admin(?:istrator)?|super\s*-?\s*user)\s+(?:access|rights|privileges?|permissions?)\b"
        r"|\bmake\s+(?:me|them|him|her|the\s+user|this\s+user|user)\s+(?:an?\s+)?"
        rf"{_PRIVILEGED_ROLE}\b",
    ),
    _p(
        "tells the assistant to promote something",
        _PROMOTING_START
        + _PROMOTE
        + r"|\b(?:from\s+now\s+on|going\s+forward|henceforth|from\s+this\s+point(?:\s+on)?)\b"
        r"[^.!?\n]{0,60}?\b"
        + _PROMOTE
        + r"|\byou\s+(?:must|should|shall|will|need\s+to|have\s+to|are\s+(?:required"
        r"|instructed|expected|supposed)\s+to)\s+(?:\w+\s+){0,2}?"
        + _PROMOTE
        + r"|\b(?:recommend|suggest|promote|endorse|advertise|push)\s+[^.!?\n]{1,40}?\s+"
        r"(?:to|for)\s+(?:every|all|any|each)\s+(?:users?|customers?|people|visitors?"
        r"|clients?|one|body)\b",
    ),
    _p(
        "addresses the AI directly",
        r"\b(?:note|message|instructions?|reminder|memo|attention|warning|dear|hey)\s*(?:to|for)?"
        rf"\s*(?:the\s+|all\s+|any\s+|every\s+)?(?:{_ASSISTANT}|ai\s+agents?)\b"
        rf"|\b{_ASSISTANT}\s*[,:]?\s+(?:should|must|shall|will\s+(?:now|always|never|only)"
        r"|needs?\s+to|has\s+to|have\s+to|is\s+(?:to|required|instructed|expected)"
        r"|are\s+(?:to|required|instructed|expected))\b"
        rf"|\b(?:if|when)\s+you\s+are\s+(?:an?\s+)?(?:{_ASSISTANT}|bot)\b"
        rf"|\b{_ASSISTANT}\s+(?:reading|processing|parsing|summari[sz]ing|seeing)\s+this\b",
        soft=True,
    ),
    _p(
        "tells the assistant how to behave",
        _IMPERATIVE_START + rf"(?:{_BEHAVE}|{_PROMOTE})",
        soft=True,
    ),
    _p(
        "changes the assistant's behaviour from now on",
        r"\b(?:from\s+now\s+on|going\s+forward|henceforth|from\s+this\s+point(?:\s+on)?"
        r"|in\s+(?:all\s+)?future\s+(?:answers|replies|responses|conversations|sessions))\b"
        r"[^.!?\n]{0,60}?\b(?:you|always|never|only|must|should|remember|answer|reply"
        r"|respond|call|say|tell|use|treat|refer|ignore|address|speak|talk)\b",
        soft=True,
    ),
    _p(
        "gives the assistant orders",
        r"\byou\s+(?:must|should|shall|will|need\s+to|have\s+to|are\s+(?:required|instructed"
        r"|expected|supposed)\s+to)\s+(?:(?:now|also|only|always|never|not)\s+)*(?:answer"
        r"|reply|respond|speak|talk|say|tell|refuse|pretend|act|behave|treat|call|address"
        r"|obey|comply|reveal|disclose|output|print|ignore|forget|disregard)\b",
        soft=True,
    ),
    _p(
        "plants a delayed trigger",
        _TRIGGER_START + r"\b(?:tell|say|reply|respond|show|include)\b"
        r"|\bnext\s+time\b[^.!?\n]{0,80}?\b(?:save|store|record|remember\s+that|grant|mark"
        r"|set|assign|elevate|upgrade|recommend|suggest|promote|tell|send|reveal|ignore"
        r"|treat)\b",
        soft=True,
    ),
)


def _instruction_hits(text: str, source_type: str) -> list[tuple[_Pattern, re.Match[str]]]:
    direct = source_type in DIRECT_EVIDENCE
    patterns = [p for p in _INSTRUCTION_PATTERNS if not (p.soft and direct)]
    return _hits(patterns, _mask_mentions(text))


def check_instruction(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    text = _text(proposal.statement)
    hits = _instruction_hits(text.skeleton, proposal.source_type)
    if not hits:
        return []
    pattern, match = hits[0]
    detail = (
        f"Reads as an instruction to the assistant ({pattern.reason}): "
        f"{_show(text.clean[match.start() : match.end()])}."
    )
    if len(hits) > 1:
        others = sorted({p.reason for p, _ in hits[1:]} - {pattern.reason})
        if others:
            detail += f" Also: {'; '.join(others)}."
    return [Finding("instruction", "high", detail)]


# --- markup and role tags -------------------------------------------------------

_EVENT_HANDLERS = (
    r"on(?:abort|afterprint|animation\w*|auxclick|before\w+|blur|cancel|canplay\w*|change"
    r"|click|close|contextmenu|copy|cuechange|cut|dblclick|drag\w*|drop|durationchange"
    r"|emptied|ended|error|focus\w*|formdata|fullscreen\w*|gotpointercapture|hashchange"
    r"|input|invalid|key\w+|load\w*|lostpointercapture|message\w*|mouse\w+|pagehide"
    r"|pageshow|paste|pause|play\w*|pointer\w+|popstate|progress|ratechange|reset|resize"
    r"|scroll\w*|search|seek\w+|select\w*|show|stalled|storage|submit|suspend|timeupdate"
    r"|toggle|touch\w+|transition\w*|unload|volumechange|waiting|wheel|begin|end|repeat)"
)
_MARKUP_PATTERNS: tuple[_Pattern, ...] = (
    _p(
        "chat role tag",
        r"<\s*/?\s*(?:system|assistant|developer|tool|function(?:_call)?|instructions?|summary"
        r"|memory|memories|context|prompt|sys|inst|im_start|im_end|endoftext)\b[^<>]*>"
        r"|<\s*/\s*(?:user|human)\s*>",
    ),
    _p("model control token", r"<\|[a-z0-9_]{2,40}\|>|<\s*/?\s*s\s*>"),
    _p(
        "instruction-format marker",
        r"\[/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>"
        r"|(?:^|\n)\s*#{2,}\s*(?:system|instruction|assistant|response)\s*:?\s*(?:\n|$)",
    ),
    _p(
        "active HTML element",
        r"</?(?:script|iframe|frame|frameset|object|embed|applet|style|link|meta|base|form"
        r"|input|button|textarea|select|img|image|svg|math|video|audio|source|body|html"
        r"|template|dialog|marquee|noscript|xmp|plaintext|portal|isindex|keygen)\b[^<>]*>?"
        r"|<a\s[^<>]*\bhref\b",
    ),
    _p("htmx attribute", r"\b(?:data-)?hx-[a-z]+(?:[-:][a-z]+)*\s*="),
    _p("event-handler attribute", rf"\b{_EVENT_HANDLERS}\s*="),
    _p(
        "script URL",
        r"\b(?:javascript|vbscript|livescript):(?=\S)"
        r"|(?:href|src|action|formaction|xlink:href)\s*=\s*[\"']?\s*(?:javascript|vbscript)\s*:"
        r"|\]\(\s*(?:javascript|vbscript)\s*:"
        r"|\bdata:\s*(?:text/html|image/svg\+xml|(?:application|text)/(?:x-)?javascript)",
    ),
)


def _markup_hits(text: str) -> list[tuple[_Pattern, re.Match[str]]]:
    return _hits(_MARKUP_PATTERNS, text)


def check_markup(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    text = _text(proposal.statement)
    hits = _markup_hits(text.skeleton)
    if not hits:
        return []
    kinds = ", ".join(dict.fromkeys(p.reason for p, _ in hits))
    _, match = hits[0]
    return [
        Finding(
            "markup",
            "high",
            f"Contains markup that could steer the model or act in the review console ({kinds}): "
            f"{_show(text.clean[match.start() : match.end()])}.",
        )
    ]


# --- hidden text -------------------------------------------------------------------

_HTML_COMMENT = re.compile(r"<!--[\s\S]*?(?:-->|$)")
_CSS_HIDDEN = re.compile(
    r"style\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0"
    r"|opacity\s*:\s*0(?:\.0+)?\s*(?:[;\"']|$)|color\s*:\s*(?:white|#fff(?:fff)?|transparent))",
    re.IGNORECASE,
)


def _is_emoji_part(ch: str) -> bool:
    if not ch:
        return False
    code = ord(ch)
    return unicodedata.category(ch) == "So" or code >= 0x1F000 or 0xFE00 <= code <= 0xFE0F


def _is_joining_script_letter(ch: str) -> bool:
    # ZWNJ is spelling in Persian and several Indic scripts, not concealment.
    return bool(ch) and ch.isalpha() and ord(ch) >= 0x0590


def _is_legitimate_joiner(text: str, index: int) -> bool:
    ch = text[index]
    before = text[index - 1] if index else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    if ch == "\u200d":  # joins emoji sequences such as a technologist emoji
        return _is_emoji_part(before) and _is_emoji_part(after)
    if ch == "\u200c":
        return _is_joining_script_letter(before) and _is_joining_script_letter(after)
    return False


def check_hidden_text(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    raw = unicodedata.normalize("NFKC", proposal.statement)
    counts: dict[str, int] = {}
    tag_text: list[str] = []
    for index, ch in enumerate(raw):
        if not is_hidden_char(ch) or _is_legitimate_joiner(raw, index):
            continue
        if ord(ch) in TAG_CHAR_RANGE:
            # Tag characters mirror ASCII one-to-one, so the hidden message is readable.
            tag_text.append(chr(ord(ch) - 0xE0000) if 0xE0020 <= ord(ch) <= 0xE007E else "")
            continue
        counts[ch] = counts.get(ch, 0) + 1
    problems = [f"{n} x {_char_label(ch)}" for ch, n in counts.items()]
    if tag_text:
        problems.append(f"invisible Unicode tag characters spelling {_show(''.join(tag_text))}")
    clean = _text(proposal.statement).clean
    comment = _HTML_COMMENT.search(clean)
    if comment:
        problems.append(f"an HTML comment, which renders as nothing: {_show(comment.group())}")
    css = _CSS_HIDDEN.search(clean)
    if css:
        problems.append(f"CSS that hides text: {_show(css.group())}")
    if not problems:
        return []
    return [
        Finding(
            "hidden_text",
            "high",
            f"Contains text a reviewer would not see: {'; '.join(problems)}. "
            f"With it removed the statement reads {_show(clean)}.",
        )
    ]


# --- encoded payloads ------------------------------------------------------------

_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}")
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,}(?![0-9A-Fa-f])")
_ESCAPED_BYTES = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){4,}")
_UNICODE_ESCAPES = re.compile(r"(?:\\u[0-9A-Fa-f]{4}){3,}")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2}){3,}")
# Percent-encoding these is never needed, so encoding them is concealment.
_NEEDLESSLY_ENCODED = re.compile(r"[A-Za-z0-9<>\"'(){};=]")


def _printable_text(raw: bytes) -> str | None:
    """The decoded text if ``raw`` is readable text rather than random bytes.

    Hashes, ids and keys decode to noise; a hidden message decodes to words.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 8:
        return None
    printable = sum(1 for ch in text if ch.isprintable() or ch in "\t\n\r")
    letters = sum(1 for ch in text if ch.isalpha())
    if printable < 0.95 * len(text) or letters < 0.4 * len(text):
        return None
    return text


def _decode_base64(run: str) -> str | None:
    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:
        body = body[:-1]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _printable_text(raw)


def _decode_hex(run: str) -> str | None:
    try:
        return _printable_text(bytes.fromhex(run))
    except ValueError:
        return None


def _encoded_runs(text: str) -> list[tuple[str, str, str]]:
    """(kind, encoded fragment, decoded text) for every run that hides readable text."""
    found: list[tuple[str, str, str]] = []
    for match in _BASE64_RUN.finditer(text):
        decoded = _decode_base64(match.group())
        if decoded is not None:
            found.append(("base64", match.group(), decoded))
    for match in _HEX_RUN.finditer(text):
        decoded = _decode_hex(match.group())
        if decoded is not None:
            found.append(("hex", match.group(), decoded))
    for match in _ESCAPED_BYTES.finditer(text):
        decoded = _decode_hex(match.group().replace("\\x", ""))
        if decoded is not None:
            found.append(("\\x-escaped", match.group(), decoded))
    for match in _UNICODE_ESCAPES.finditer(text):
        decoded = "".join(chr(int(c, 16)) for c in re.findall(r"\\u([0-9A-Fa-f]{4})", match.group()))
        if any(ch.isalpha() for ch in decoded):
            found.append(("\\u-escaped", match.group(), decoded))
    for match in _PERCENT_RUN.finditer(text):
        decoded = unquote(match.group())
        if _NEEDLESSLY_ENCODED.search(decoded):
            found.append(("percent-encoded", match.group(), decoded))
    return found


def check_encoded_payload(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    text = _text(proposal.statement)
    problems = [
        f"{kind} {_show(fragment)} decodes to {_show(decoded)}"
        for kind, fragment, decoded in _encoded_runs(text.clean)
    ]
    # Markup or instructions that only appear once percent- or entity-decoded
    # are aimed at whatever decodes them later (a browser, a model).
    decoded_all = html.unescape(unquote(text.clean))
    if decoded_all != text.clean:
        folded = fold_confusables(decoded_all)
        before = {p.reason for p, _ in _markup_hits(text.skeleton)}
        before |= {p.reason for p, _ in _instruction_hits(text.skeleton, proposal.source_type)}
        for pattern, match in _markup_hits(folded) + _instruction_hits(folded, proposal.source_type):
            if pattern.reason not in before:
                problems.append(
                    f"escaped text decodes to {pattern.reason}: "
                    f"{_show(decoded_all[match.start() : match.end()])}"
                )
                break
    if not problems:
        return []
    return [
        Finding(
            "encoded_payload",
            "high",
            f"Contains encoded text a reviewer cannot read at a glance: {'; '.join(problems)}.",
        )
    ]


# --- look-alike letters ------------------------------------------------------------

_WORD = re.compile(r"[^\W\d_]+")


def _script(ch: str) -> str:
    return unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]


def check_homoglyph(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    clean = _text(proposal.statement).clean
    letters = [ch for ch in clean if ch.isalpha()]
    latin_share = sum(1 for ch in letters if _script(ch) == "LATIN") / max(len(letters), 1)
    for match in _WORD.finditer(clean):
        word = match.group()
        lookalikes = [ch for ch in word if ch in CONFUSABLE_CHARS]
        if not lookalikes:
            continue
        scripts = {_script(ch) for ch in word}
        mixed = "LATIN" in scripts
        # A word spelled wholly in look-alikes (PAYPAL in Cyrillic) inside Latin text is the
        # same trick; a Russian or Greek sentence is not, hence the share test.
        disguised = len(word) >= 3 and len(lookalikes) == len(word) and latin_share > 0.5
        if not (mixed or disguised):
            continue
        foreign = ", ".join(sorted({_char_label(ch) for ch in lookalikes}))
        how = "mixes Latin letters with" if mixed else "is spelled entirely in"
        return [
            Finding(
                "homoglyph",
                "high",
                f"The word {_show(word)} {how} look-alike letters from another script "
                f"({foreign}); it reads as {_show(fold_confusables(word))} but would not "
                "match it.",
            )
        ]
    return []


# --- exfiltration-shaped links -------------------------------------------------------

_MARKDOWN_IMAGE = re.compile(r"!\[[^\]\n]*\]\(\s*<?\s*((?:https?:)?//[^\s)>]+)", re.IGNORECASE)
_URL = re.compile(r"(?:\bhttps?://|\bwww\.)[^\s<>\"'`]+", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"[{}$<>]|%7b|%7d|%24|%3c|%3e", re.IGNORECASE)
_PLACEHOLDER_VALUE = re.compile(r"^[A-Z][A-Z0-9_]{2,}$")
_DATA_WORDS = frozenset(
    {
        "email",
        "mail",
        "password",
        "passwd",
        "pwd",
        "secret",
        "token",
        "key",
        "apikey",
        "ssn",
        "card",
        "cc",
        "phone",
        "dob",
        "conversation",
        "conv",
        "chat",
        "history",
        "memory",
        "memories",
        "context",
        "prompt",
        "msg",
        "message",
        "messages",
        "transcript",
        "cookie",
        "cookies",
        "session",
        "sessionid",
        "payload",
        "exfil",
        "leak",
        "dump",
        "creds",
        "credentials",
        "pii",
        "data",
        "user",
        "username",
    }
)
# Public request-capture services: a link to one in a memory exists to receive data.
_COLLECTOR_HOSTS = (
    "webhook.site",
    "requestbin.net",
    "requestbin.com",
    "pipedream.net",
    "ngrok.io",
    "ngrok.app",
    "ngrok-free.app",
    "burpcollaborator.net",
    "oastify.com",
    "interact.sh",
    "oast.fun",
    "oast.pro",
    "oast.live",
    "oast.site",
    "oast.online",
    "oast.me",
    "requestcatcher.com",
    "beeceptor.com",
    "hookbin.com",
    "canarytokens.com",
    "dnslog.cn",
    "postb.in",
    "ptsv2.com",
    "ptsv3.com",
)
_SEND_DATA_TO_LINK = re.compile(
    r"\b(?:send|post|forward|append|upload|leak|exfiltrate|transmit|submit|attach|encode)\b"
    r"[^.!?\n]{0,60}?\b(?:conversations?|chats?|history|transcripts?|memor(?:y|ies)|context"
    r"|messages?|user(?:'s)?\s+(?:data|details|info|email|name|address)"
    r"|personal\s+(?:data|details|information)|passwords?|credentials|secrets?"
    r"|api\s+keys?|tokens?)\b[^.!?\n]{0,60}?(?:https?://|www\.|\b(?:url|link|endpoint|webhook)\b)",
    re.IGNORECASE,
)


def _words(value: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", value.lower()) if w}


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = (parts.hostname or "").lower()
    if any(host == h or host.endswith(f".{h}") for h in _COLLECTOR_HOSTS):
        return f"points at {host}, a service for capturing requests"
    tail = url.split(parts.netloc, 1)[-1] if parts.netloc else url
    if _PLACEHOLDER.search(tail):
        return "has a template placeholder for data to be filled in"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        carried = _words(name) & _DATA_WORDS
        if carried:
            return f"query parameter {name!r} carries {sorted(carried)[0]} data"
        if _PLACEHOLDER_VALUE.match(value) and _words(value) & _DATA_WORDS:
            return f"query parameter {name!r} is a placeholder for user data ({value})"
        if len(value) > 64:
            return f"query parameter {name!r} carries a long value ({len(value)} characters)"
        if any(_decode_base64(m.group()) for m in _BASE64_RUN.finditer(value)):
            return f"query parameter {name!r} carries encoded text"
    return None


def check_exfiltration_link(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    clean = _text(proposal.statement).clean
    problems: list[str] = []
    for match in _MARKDOWN_IMAGE.finditer(clean):
        url = match.group(1)
        why = _url_problem(url)
        problems.append(
            f"markdown image {_show(match.group())} is fetched automatically when rendered"
            + (f" and {why}" if why else "")
        )
    for match in _URL.finditer(clean):
        url = match.group().rstrip(".,;:!?)]")
        why = _url_problem(url)
        if why and not any(url in p for p in problems):
            problems.append(f"link {_show(url)} {why}")
    sending = _SEND_DATA_TO_LINK.search(clean)
    if sending:
        problems.append(f"asks to send data to a link: {_show(sending.group())}")
    if not problems:
        return []
    return [
        Finding(
            "exfiltration_link",
            "high",
            f"Shaped to carry data out when an assistant renders or follows it: {'; '.join(problems)}.",
        )
    ]


# --- addressing the reviewer ---------------------------------------------------------

_REVIEWER = (
    r"(?:reviewers?|moderators?|approvers?|t\s*&\s*s|trust\s+(?:and|&)\s+safety"
    r"|human\s+reviewers?|safety\s+team|review\s+team|moderation\s+team)"
)
_REVIEWER_PATTERNS: tuple[_Pattern, ...] = (
    _p("claims prior approval", r"\bpre-?\s?approved\b|\bpreapproved\b"),
    _p(
        "tells the reviewer it is safe",
        r"\b(?:safe|ok|okay|fine)\s+to\s+(?:approve|accept|allow|whitelist|publish)\b",
    ),
    _p(
        "writes to the reviewer",
        r"\b(?:note|message|instructions?|memo|reminder)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
        rf"{_REVIEWER}\b"
        rf"|\b(?:dear|attention|hey|hi)\s+{_REVIEWER}\b"
        rf"|\b{_REVIEWER}\s*[:,\-]\s*(?:please\s+)?(?:approve|accept|allow|ignore|skip|whitelist"
        r"|do\s+not|don'?t)\b",
    ),
    _p(
        "claims it was already approved",
        r"\b(?:this|it)\s+(?:write|memory|memories|entry|fact|statement|content|item|request"
        r"|submission|change|note|update)?\s*(?:is|was|has|have)\s+(?:been\s+)?already\s+"
        r"(?:been\s+)?(?:approved|reviewed|vetted|cleared|verified|whitelisted|allowlisted)\b"
        r"|\balready\s+(?:been\s+)?(?:approved|reviewed|vetted|cleared)\s+by\s+"
        rf"(?:the\s+)?(?:{_REVIEWER}|security|compliance|admins?)\b"
        r"|\b(?:approved|vetted|cleared|verified|whitelisted|allowlisted)\s+by\s+(?:the\s+|a\s+)?"
        rf"{_REVIEWER}\b",
    ),
    _p(
        "asks not to be reviewed",
        r"\bdo\s+not\s+(?:flag|quarantine|reject|review|block|escalate)\b"
        r"|\bno\s+(?:further\s+)?(?:review|moderation)\s+(?:is\s+)?(?:needed|required|necessary)\b"
        r"|\bauto-?approve\b|\bapprove\s+(?:this|it)\s+(?:immediately|automatically|without)\b",
    ),
)


def check_reviewer_address(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    text = _text(proposal.statement)
    hits = _hits(_REVIEWER_PATTERNS, _mask_mentions(text.skeleton))
    if not hits:
        return []
    pattern, match = hits[0]
    return [
        Finding(
            "reviewer_address",
            "high",
            f"Speaks to the human reviewer ({pattern.reason}) to get itself approved: "
            f"{_show(text.clean[match.start() : match.end()])}. Memory content has no say "
            "in its own review.",
        )
    ]


# --- re-learning what was rejected or withdrawn ------------------------------------


def check_resubmitted_rejected(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    if not context.rejected_fingerprints:
        return []
    fingerprint = statement_fingerprint(proposal.statement, context.fingerprint_key)
    if fingerprint not in context.rejected_fingerprints:
        return []
    return [
        Finding(
            "resubmitted_rejected",
            "high",
            f"Re-submits an assertion a reviewer already rejected in this project "
            f"(same statement once case, spacing and punctuation are ignored): "
            f"{_show(proposal.statement)}.",
        )
    ]


def check_tombstoned(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    if not context.tombstones:
        return []
    fingerprint = statement_fingerprint(proposal.statement, context.fingerprint_key)
    tombstone_id = context.tombstones.get(fingerprint)
    if tombstone_id is None:
        return []
    return [
        Finding(
            "tombstoned",
            "high",
            f"Matches tombstone {tombstone_id}: withdrawn assertion. Someone asked for it to be "
            "forgotten, and a withdrawal blocks the same assertion from being learned again (R8).",
        )
    ]


# --- write-back (R16) ------------------------------------------------------------------


def check_derived_from_retrieval(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    if not proposal.derived_from_retrieval:
        return []
    cap = source_cap(proposal.source_type, context.source_caps)
    requested = proposal.requested_authority
    before = cap if requested is None else min(requested, cap)
    after = resolve_authority(proposal, context)
    detail = (
        "Derived from a retrieval: the agent is writing back memory it was given, and "
        "retention gives no authority (R16)."
    )
    if after < before:
        origin = (
            "the highest authority among the retrieved items it came from"
            if proposal.derived_max_authority is not None
            else "because the authority of what it came from is unknown"
        )
        detail += f" Authority capped at {after} ({origin})."
    findings = [Finding("derived_from_retrieval", "medium", detail)]
    if context.recent_derived_writes >= AMPLIFICATION_LIMIT:
        findings.append(
            Finding(
                "write_back_amplification",
                "high",
                f"This agent already wrote {context.recent_derived_writes} derived memories in "
                f"the last hour (limit {AMPLIFICATION_LIMIT}); writing retrieved memory back "
                "again and again can turn one poisoned fact into many (R16).",
            )
        )
    return findings


# --- bursts and conflicts with verified memory ---------------------------------------


def _contradicts_verified(proposal: WriteProposal, context: GuardContext) -> bool:
    # R6: same principal and key with a different statement is a conflict.
    verified = context.verified_statement_for_key
    return verified is not None and (normalise_statement(verified) != normalise_statement(proposal.statement))


def check_burst(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    duplicates = sum(
        1 for earlier in context.recent_agent_statements if near_duplicate(proposal.statement, earlier)
    )
    if duplicates < BURST_MIN_DUPLICATES:
        return []
    detail = (
        f"The same agent wrote {duplicates} near-identical statements in the last few minutes; "
        "repeating a claim can make it look corroborated."
    )
    if _contradicts_verified(proposal, context):
        detail += f" It contradicts the verified fact {_show(context.verified_statement_for_key or '')}."
        return [Finding("burst", "high", detail)]
    return [Finding("burst", "medium", detail)]


def check_contradicts_verified(proposal: WriteProposal, context: GuardContext) -> list[Finding]:
    if proposal.source_type in DIRECT_EVIDENCE or not _contradicts_verified(proposal, context):
        return []
    return [
        Finding(
            "contradicts_verified",
            "medium",
            f"Contradicts the verified fact {_show(context.verified_statement_for_key or '')}"
            f"{f' for {proposal.key}' if proposal.key else ''}. A {proposal.source_type} "
            "source is not direct evidence, so it cannot replace verified memory without "
            "review (R6).",
        )
    ]


# --- the decision --------------------------------------------------------------------------

CHECKS: tuple[Check, ...] = (
    check_visible_content,
    check_authority_cap,
    check_source_trust,
    check_instruction,
    check_markup,
    check_hidden_text,
    check_encoded_payload,
    check_homoglyph,
    check_exfiltration_link,
    check_reviewer_address,
    check_resubmitted_rejected,
    check_tombstoned,
    check_derived_from_retrieval,
    check_burst,
    check_contradicts_verified,
)

_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}


def decide_outcome(findings: Sequence[Finding], authority: int, *, auto_approve_min_authority: int) -> str:
    checks = {f.check for f in findings}
    if checks & REJECTING_CHECKS:
        return "rejected"
    if any(f.severity == "high" for f in findings):
        return "quarantined"
    if findings or authority < auto_approve_min_authority:
        return "pending_review"
    return "active"


def check_write(
    proposal: WriteProposal, context: GuardContext, *, auto_approve_min_authority: int
) -> GuardResult:
    """Run every check (R5) and decide what becomes of the write."""
    findings = [finding for check in CHECKS for finding in check(proposal, context)]
    # Riskiest first, so the review queue shows the reason that matters most.
    findings.sort(key=lambda f: -_SEVERITY_RANK[f.severity])
    authority = resolve_authority(proposal, context)
    outcome = decide_outcome(findings, authority, auto_approve_min_authority=auto_approve_min_authority)
    return GuardResult(authority=authority, findings=tuple(findings), outcome=outcome)
