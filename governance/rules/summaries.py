"""R17: summaries are lossy; check them against what they summarised.

``check_summary`` finds the items in the source text that a reviewer would not
want a summary to lose (names, titles and roles, numbers, dates and times,
identifiers, prohibitions and negations, failed or unfinished steps) and
reports those the summary does not carry. ``highlight_source`` turns the
report into segments for the console's side-by-side view.

Everything here is rules over plain strings: no spaCy model is available
offline, and a check that runs in the request must not load one. The rules
err towards flagging, because a flagged summary only costs a reviewer a look,
while a silently lost "never call after 6pm" costs the person it protects.

How "carried" is decided, per category (all case-insensitive unless noted):

- name: any significant word of the name appears as a whole word ("Alice
  Chen" is carried by "Alice" or "Ms Chen"). Names that are also ordinary words
  ("Will", "May", "Mark") must keep their capital letter to count.
- title: every word of the title appears somewhere in the summary, with the
  usual acronyms expanded both ways (CTO = chief technology officer, VP = vice
  president), so "VP Engineering" carries "VP of Engineering".
- number: the same value appears (4,500 = 4500 = 4.5k; three = 3; 15% = 15
  percent).
- date: a date in the summary agrees with it on every part both state, and
  states the source's most specific part (3 March is carried by "March 3rd,
  2025"; 6pm by "18:00"; Friday 3 March by "3 March"; a bare year also by the
  same number).
- identifier: the identifier appears verbatim, ignoring URL scheme, a leading
  "v" on versions and trailing slashes.
- prohibition and unfinished: one sentence of the summary holds a negation
  (for unfinished: a failure or pending marker) and at least half of the
  clause's key content words, after light stemming and a few synonym groups
  (call/phone/ring, email/mail, touch/change/modify...). Half rather than all,
  because summaries reword: "Acme Corp must never see the draft" carries
  "Never share the draft with Acme Corp"; names, dates and identifiers inside
  the clause are still checked on their own, so "never call after 7pm" does
  not carry "never call after 6pm" (the 6pm is reported as a dropped date).
  A summary that keeps the words but loses the negation ("call after 6pm")
  does not carry it, and the marker must be a word of its own ("investigated
  the crash" does not carry "couldn't reproduce the crash").

Items inside a dropped clause are not reported again on their own: the clause
already names them. Every occurrence of a dropped item is reported, so the
console can highlight each; ``SummaryCheck.distinct()`` gives one per text.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# The largest texts the check accepts (the session API refuses larger ones).
# The check runs in the request, so it must stay fast: it is linear, and
# tests/governance/rules/test_linear_time.py holds it to 100 ms at these
# sizes (about 35 ms on the densest inputs on an idle machine, so the suite
# still passes when the machine is busy). Raising them needs a faster
# extractor, not a longer budget.
MAX_SOURCE_CHARS = 6_000
MAX_SUMMARY_CHARS = 2_000

CATEGORIES: tuple[str, ...] = (
    "name",
    "title",
    "number",
    "date",
    "identifier",
    "prohibition",
    "unfinished",
)
_CLAUSE_CATEGORIES = frozenset({"prohibition", "unfinished"})
_CATEGORY_ORDER = {category: i for i, category in enumerate(CATEGORIES)}


@dataclass(frozen=True)
class DroppedItem:
    """Something the source says that the summary does not carry.

    ``start``/``end`` are offsets into the source text, ``text`` is
    ``source_text[start:end]``.
    """

    category: str
    text: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "text": self.text, "start": self.start, "end": self.end}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DroppedItem:
        """Rebuild from ``to_dict()`` output (e.g. a stored finding)."""
        return cls(
            category=str(data["category"]),
            text=str(data["text"]),
            start=int(data["start"]),
            end=int(data["end"]),
        )


@dataclass(frozen=True)
class SummaryCheck:
    dropped: tuple[DroppedItem, ...] = ()

    @property
    def material(self) -> bool:
        # Any dropped item is material: R17 sends the summary to review and
        # lets a person decide whether the loss matters.
        return bool(self.dropped)

    def distinct(self) -> tuple[DroppedItem, ...]:
        """First occurrence of each (category, text), for findings a person reads."""
        seen: set[tuple[str, str]] = set()
        out: list[DroppedItem] = []
        for item in self.dropped:
            key = (item.category, item.text.casefold())
            if key not in seen:
                seen.add(key)
                out.append(item)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"material": self.material, "dropped": [item.to_dict() for item in self.dropped]}


def check_summary(summary: str, source_text: str) -> SummaryCheck:
    """Report what ``source_text`` says that ``summary`` does not carry (R17)."""
    items = _extract(source_text)
    view = _SummaryView(summary)
    dropped = [item for item in items if not _carried(item, view)]
    # A dropped clause already names what is inside it; listing its name or
    # time again would only repeat it to the reviewer.
    # Clauses never overlap one another, so the only one that can hold an item
    # is the last to start at or before it (a bisection, not a scan per item).
    clauses = sorted((d for d in dropped if d.category in _CLAUSE_CATEGORIES), key=lambda c: c.start)
    clause_starts = [c.start for c in clauses]
    kept: list[DroppedItem] = []
    for item in dropped:
        k = bisect.bisect_right(clause_starts, item.start) - 1
        if item.category not in _CLAUSE_CATEGORIES and k >= 0 and item.end <= clauses[k].end:
            continue
        kept.append(DroppedItem(item.category, source_text[item.start : item.end], item.start, item.end))
    kept.sort(key=lambda d: (d.start, -d.end, _CATEGORY_ORDER[d.category]))
    return SummaryCheck(dropped=tuple(kept))


def highlight_source(source_text: str, dropped: Iterable[DroppedItem]) -> list[tuple[str, bool]]:
    """Split the source into ``(text, is_dropped)`` segments for a diff view.

    The segments do not overlap, cover the whole source in order, and are
    never empty; overlapping or touching dropped spans merge into one.
    """
    spans: list[tuple[int, int]] = []
    for item in dropped:
        if not 0 <= item.start <= item.end <= len(source_text):
            raise ValueError(
                f"Dropped item {item.text!r} at {item.start}-{item.end} lies outside the source "
                f"text ({len(source_text)} characters); was it checked against another text?"
            )
        if item.end > item.start:
            spans.append((item.start, item.end))
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    segments: list[tuple[str, bool]] = []
    pos = 0
    for start, end in merged:
        if start > pos:
            segments.append((source_text[pos:start], False))
        segments.append((source_text[start:end], True))
        pos = end
    if pos < len(source_text):
        segments.append((source_text[pos:], False))
    return segments


# ---------------------------------------------------------------------------
# Word lists


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FUNCTION_WORDS = _words(
    """
    a an the this that these those i me my mine we us our ours you your yours he him his she her
    hers it its they them their theirs and or nor but so yet if then than as of to in on at by for
    from with about into onto over per via up out off is are was were be been being am do does did
    doing done have has had having will would shall should can could may might must let lets there
    here what which who whom whose where when why how all any some each every both either neither
    such very just also too only even still again ever really please thanks thank ok okay yes no not
    anymore any more most much many few other another same own one ones something anything
    """
)

_MONTHS: dict[str, int] = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_NUMBER_WORDS: dict[str, int] = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    "hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000,
    "dozen": 12, "twice": 2, "thrice": 3,
}  # fmt: skip
# "one" is left out on purpose: "one of them", "no one" are not quantities.
# "twice" and "thrice" say how often, not how much: reported alone as dropped
# numbers they were noise to reviewers. They still count as 2 and 3 when the
# summary's words are compared with the source's.
_FREQUENCY_WORDS = frozenset({"twice", "thrice"})
_UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_UNIT_VALUES = {w: i + 1 for i, w in enumerate(_UNITS)}

# Acronyms and their expansions, used both to find titles and to decide that
# "CTO" and "chief technology officer" carry each other.
_TITLE_ACRONYMS: dict[str, str] = {
    "CEO": "chief executive officer",
    "CTO": "chief technology officer",
    "CFO": "chief financial officer",
    "COO": "chief operating officer",
    "CIO": "chief information officer",
    "CISO": "chief information security officer",
    "CPO": "chief product officer",
    "CMO": "chief marketing officer",
    "CRO": "chief revenue officer",
    "CSO": "chief security officer",
    "CDO": "chief data officer",
    "CHRO": "chief human resources officer",
    "DPO": "data protection officer",
    "VP": "vice president",
    "SVP": "senior vice president",
    "EVP": "executive vice president",
    "AVP": "assistant vice president",
    "GM": "general manager",
    "SRE": "site reliability engineer",
    "CSM": "customer success manager",
    "TPM": "technical program manager",
}
_WORD_ABBREVIATIONS: dict[str, str] = {
    "sr": "senior",
    "jr": "junior",
    "eng": "engineering",
    "mgr": "manager",
    "dir": "director",
    "pres": "president",
    "ops": "operations",
    "vp": "vice president",
}
# Role nouns that are a title on their own.
_ROLES = _words(
    "vice president president director manager officer founder co-founder cofounder chair chairman "
    "chairwoman chairperson lawyer attorney solicitor barrister counsel paralegal accountant auditor "
    "doctor physician surgeon nurse dentist pharmacist therapist psychiatrist psychologist landlord "
    "landlady supervisor recruiter consultant contractor intern architect engineer developer designer "
    "analyst administrator sysadmin secretary treasurer teacher professor dean judge boss coordinator "
    "specialist representative executive editor producer advisor adviser investor broker banker mayor "
    "minister senator governor caseworker notary "
    # These need a modifier ("team lead", "product owner") or a complement
    # ("head of"), checked after matching.
    "lead owner assistant partner head"
)
_ROLES_NEEDING_MODIFIER = frozenset({"lead", "owner", "assistant", "partner"})
_MODIFIERS = _words(
    "senior sr junior jr lead principal staff chief deputy assistant associate acting interim "
    "executive regional general managing founding technical tech team engineering product project "
    "program programme account sales marketing hiring office finance financial operations ops security "
    "legal it hr data software backend frontend full-stack devops platform infrastructure site "
    "reliability on-call support customer success delivery release qa test store branch property case "
    "family personal compliance privacy protection research design people country area district "
    "medical clinical line direct ux ui solutions systems network database cloud technology "
    "information operating revenue digital risk nursing science strategy innovation experience "
    "growth commercial human resources vice"
)
_DEPARTMENTS = _words(
    "engineering sales marketing product products finance operations ops security legal design "
    "research data analytics it hr people support customer customers success infrastructure platform "
    "growth compliance risk technology strategy partnerships business development communications comms "
    "procurement quality qa devops reliability talent recruiting content brand revenue accounts "
    "payments billing trust safety privacy policy architecture innovation education admissions "
    "facilities logistics supply chain manufacturing services software hardware cloud ai ml machine "
    "learning science experience ux user mobile web frontend backend applications systems network "
    "networking delivery programs projects project program human resources"
)
_HONORIFICS = frozenset({"dr", "mr", "mrs", "ms", "mx", "prof", "sir", "dame", "miss", "rev", "fr"})
# "St Pancras", "Mt Hood": a prefix that joins the name after it, like an
# honorific, and is never a name on its own ("4th St." was reported as "St").
_PLACE_PREFIXES = frozenset({"st", "mt", "ft"})
# Street-type abbreviations are never names ("3rd Ave." was reported as "Ave").
_STREET_ABBREVIATIONS = frozenset({"ave", "rd", "blvd", "ln", "hwy", "sq", "ct", "pl"})
# "I'm", "I've", "I'll", "I'd": capitalised only because "I" is.
_CONTRACTION = re.compile(r"^I['\u2019](?:m|ve|ll|d)$", re.IGNORECASE)
_NAME_PARTICLES = frozenset(
    {"van", "von", "de", "der", "den", "da", "di", "du", "la", "le", "del", "bin", "al", "ibn", "ter"}
)
_ORG_SUFFIXES = frozenset({"corp", "inc", "ltd", "llc", "gmbh", "co", "company", "group", "plc", "ag", "sa"})
# Capitalised words that are not names: sentence words, calendar words, roles.
_NOT_NAMES = (
    _FUNCTION_WORDS
    | frozenset(_MONTHS)
    | frozenset(_WEEKDAYS)
    | frozenset(_ROLES)
    | frozenset(_MODIFIERS)
    | frozenset(_DEPARTMENTS)
    | _words(
        """
        today tomorrow tonight yesterday user users customer client agent assistant team ticket note
        notes update summary meeting call email please thanks hi hello hey dear regards best cheers
        sorry urgent important action items next steps status re fwd subject date however also
        never don't dont always maybe perhaps yes no okay ok everyone someone nobody anyone everybody
        somebody morning afternoon evening night week month year weekend quarter sprint deadline
        internet api http https url json new old last first second third final done todo fyi asap
        good great thank let let's though although while whereas because since until unless after
        before during without within outside inside above below between among per via mon tue wed
        thu fri sat sun later earlier now finally meanwhile afterwards apparently instead anyway otherwise
        english french german spanish italian dutch chinese japanese european
        american british
        """
    )
)
# A sentence-initial single capitalised word is a name only if it is a known
# first name or is followed by one of these (a subject doing something).
_REPORTING_VERBS = _words(
    """
    asked asks said says wants wanted needs needed is was will has had called emailed wrote writes
    mentioned prefers preferred confirmed approved requested reported told thinks thought agreed
    joined left leads owns can should would could must may might cannot can't won't doesn't didn't
    isn't wasn't prefers likes hates loves moved signed sent replied responded noted explained
    decided promised escalated complained
    """
)
_FIRST_NAMES = _words(
    """
    aaron abdul adam adrian ahmed aisha alan albert alex alexander alexandra alice alicia amanda amelia
    amir amy ana andrea andrew angela anna anne anthony antonio arjun ava barbara ben benjamin beth
    bob brian bruno carla carlos carol caroline catherine charles charlie chen chloe chris christina
    christopher claire daniel david deborah diana diego dmitri elena elizabeth ella emily emma eric
    erin ethan eva fatima felix fiona francesca frank gabriel george grace hannah harry helen henry
    hiroshi ian isabel isabella ivan jack jacob james jane jason jean jennifer jessica joe john jonathan
    jose joseph juan julia julie karen kate katherine kenji kevin laura lauren leo li liam linda lisa
    lucas lucy luis maria mark marta martin mary matthew maya mei michael michelle mohammed muhammad
    nadia natalia nathan nicole nina noah oliver olivia omar oscar pablo patricia paul peter priya
    rachel rahul raj rebecca richard robert rosa ryan sam samantha samuel sara sarah sean sergei sofia
    sophia sophie stephen steven susan thomas tim tom tyler victoria wei william yuki zoe
    """
)
# First names that are also ordinary words: matched case-sensitively.
_WORDLIKE_NAMES = frozenset(
    {"will", "may", "grace", "hope", "joy", "mark", "bill", "rose", "faith", "jack", "frank", "sue",
     "pat", "max", "sky", "summer", "june", "april", "august", "dawn", "lily", "ray", "rob", "art"}
)  # fmt: skip

# Synonym groups for clause words: the first word is the canonical form.
_SYNONYM_GROUPS = (
    ("call", "phone", "ring", "telephone"),
    ("email", "e-mail", "mail"),
    ("text", "sms", "message"),
    ("contact", "reach"),
    ("deploy", "deployment", "release", "ship", "rollout"),
    ("change", "modify", "alter", "edit", "touch"),
    ("share", "send", "forward", "disclose"),
    ("buy", "purchase"),
    ("start", "begin"),
    ("finish", "complete"),
    ("meet", "meeting"),
)

# ---------------------------------------------------------------------------
# Patterns

_NT = r"n['\u2019]?t"
_MONTH_ALT = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAY_ALT = "|".join(_WEEKDAYS)
_ORDINAL = r"(?:st|nd|rd|th)?"
_MONTH = rf"(?P<mon>(?:{_MONTH_ALT}))\b"
_TZ = r"(?:\s?(?P<tz>UTC|GMT|BST|CET|CEST|EET|EST|EDT|CST|CDT|MST|MDT|PST|PDT|IST|JST|AEST|AEDT)\b)?"

_DATE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "iso",
        re.compile(
            r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"
            r"(?:[T ](?P<H>\d{1,2}):(?P<M>\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?!\d)"
        ),
    ),
    # Slash dates need a year, or "3/8" (three of eight) would be a date.
    ("numeric", re.compile(r"\b(?P<a>\d{1,2})[/.](?P<b>\d{1,2})[/.](?P<y>\d{4}|\d{2})\b")),
    (
        "day_month",
        re.compile(
            rf"\b(?:(?P<wd>{_WEEKDAY_ALT}),?\s+)?(?:the\s+)?(?P<d>\d{{1,2}}){_ORDINAL}(?:\s+of)?\s+"
            rf"{_MONTH}(?:,?\s+(?P<y>\d{{4}})\b)?",
            re.IGNORECASE,
        ),
    ),
    (
        "month_day",
        re.compile(
            rf"\b(?:(?P<wd>{_WEEKDAY_ALT}),?\s+)?{_MONTH}\.?\s+(?:the\s+)?(?P<d>\d{{1,2}}){_ORDINAL}"
            rf"(?![\d:])\b(?:,?\s+(?P<y>\d{{4}})\b)?",
            re.IGNORECASE,
        ),
    ),
    (
        "month",
        re.compile(
            rf"\b(?P<pre>(?:early|mid|late|end\s+of|start\s+of|beginning\s+of)[\s-]+)?{_MONTH}"
            rf"(?:\s+(?P<y>\d{{4}})\b)?",
            re.IGNORECASE,
        ),
    ),
    (
        "weekday",
        re.compile(rf"\b(?:(?:next|this|last|coming|every)\s+)?(?P<wd>{_WEEKDAY_ALT})s?\b", re.IGNORECASE),
    ),
    (
        "relative",
        re.compile(
            r"\b(?P<rel>tomorrow|tonight|yesterday|overnight"
            r"|(?:next|last|this|coming)\s+(?:week|month|year|quarter|weekend|sprint)"
            r"|(?:the\s+)?end\s+of\s+(?:the\s+)?(?:day|week|month|quarter|year|sprint)"
            r"|(?-i:EOD|EOW|EOM|EOQ|EOY|COB)|weekends?)\b",
            re.IGNORECASE,
        ),
    ),
    ("quarter", re.compile(r"\b(?P<q>Q[1-4]|H[12])(?:\s+(?P<y>\d{4}))?\b")),
    (
        "time",
        re.compile(
            rf"(?<![\w.:])(?P<H>\d{{1,2}})(?::(?P<M>\d{{2}}))?\s?(?P<ap>[ap]\.m\.|[ap]m\b){_TZ}",
            re.IGNORECASE,
        ),
    ),
    ("time24", re.compile(rf"(?<![\w.:])(?P<H>[01]?\d|2[0-3]):(?P<M>[0-5]\d)(?![\d:]){_TZ}")),
    ("timeword", re.compile(r"\b(?P<tw>noon|midday|midnight)\b", re.IGNORECASE)),
    ("year", re.compile(r"(?<![\w$€£.,-])(?P<y>(?:19|20)\d{2})(?![\w,]|\.\d)")),
)
_RELATIVE_ALIASES = {
    "eod": "end of day",
    "cob": "end of day",
    "eow": "end of week",
    "eom": "end of month",
    "eoq": "end of quarter",
    "eoy": "end of year",
    "weekends": "weekend",
}
_AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar", "august"})
_MONTH_CONTEXT = re.compile(
    r"(?:\b(?:in|by|until|till|since|before|after|of|during|from|through|early|mid|late|end|start|"
    r"beginning|this|next|last)\s+|-)$",
    re.IGNORECASE,
)

_IDENTIFIER_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Lookbehinds and bounded repeats keep these linear: an unanchored
    # "[\w.-]+" retried at every offset of a long token is quadratic.
    re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,10}"),  # email
    re.compile(r"\b(?:https?://|www\.)[^\s<>\"')\]]+[^\s<>\"')\].,;:!?]"),  # url
    re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2}|:\d{1,5})?(?![\w.]\w)"),  # ipv4
    re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b"),  # ticket: ABC-123
    # Cloud regions and host names: eu-west-2, us-east-1a, db-2, europe-west1.
    # Bounded parts: on one 100,000-letter word "[a-z]{2,}...[a-z]*" retried
    # every split point (quadratic); no real region or host name part is
    # longer than 32 letters.
    re.compile(
        r"\b(?!(?:mid|early|late|pre|post)-)[a-z]{2,32}(?:-[a-z]{1,32}){0,3}-?[a-z]{0,32}\d{1,12}[a-z]?\b(?!-\d)"
    ),
    re.compile(r"\bv\d+(?:\.\d+)*(?:[-+][\w.]+)?\b"),  # v2, v1.4.2
    re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?:[-+][\w.]+)?(?![\w.]\w)"),  # semver
    re.compile(r"#\d+\b"),  # issue or order number
    re.compile(r"(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)+"),  # path
    re.compile(
        r"(?<![\w-])[\w-]{1,100}\.(?:py|js|ts|json|ya?ml|toml|md|txt|csv|log|sql|sh|html|css|go|rs|java|rb|pdf|docx?|xlsx?)\b"
    ),
    re.compile(
        r"(?<![\w.-])[\w-]{1,63}(?:\.[\w-]{1,63}){0,10}\.(?:com|org|net|io|dev|ai|co|uk|de|fr|eu|app|cloud|gov|edu)\b"
    ),
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),  # commit hash
    # Codes mixing capitals and digits (INV2024001, A1B2), but not units (5GB).
    re.compile(r"\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)(?![0-9]+(?:[KMGT]B|[KMB]|AM|PM|X|MS)\b)[A-Z0-9]{3,}\b"),
)
# A dotted number after a product name or "version" is a version, not a decimal.
# The product name is bounded: "[\w+#-]*" from every word start of
# "AB12-AB12-..." ran to the end of the text each time (quadratic).
_VERSION_AFTER_WORD = re.compile(r"\b(?:[A-Z][\w+#-]{0,40}|version|release|ver)\s+(?P<v>\d+\.\d+)(?![\w.]\w)")

_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<cur>[$€£¥]\s?)?(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?P<suf>\s?%|\s(?:percent|thousand|million|billion)\b|(?:k|K|M|bn)\b|[a-zA-Z]{1,3}\b)?(?![\w])"
)
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
_COUNTING_WORDS = [w for w in _NUMBER_WORDS if w not in _TENS.split("|") and w not in _FREQUENCY_WORDS]
_NUMBER_WORD_RE = re.compile(
    rf"\b(?:(?P<tens>{_TENS})(?:[-\s](?P<unit>{'|'.join(_UNITS)}))?"
    rf"|(?P<word>{'|'.join(_COUNTING_WORDS)}))"
    rf"(?:[-\s]+(?P<scale>hundred|thousand|million|billion))?\b",
    re.IGNORECASE,
)
_SCALES = {"k": 1e3, "K": 1e3, "M": 1e6, "bn": 1e9, "thousand": 1e3, "million": 1e6, "billion": 1e9}

_ROLE_ALT = "|".join(re.escape(r) for r in sorted(set(_ROLES), key=len, reverse=True))
_MOD_ALT = "|".join(re.escape(m) for m in sorted(set(_MODIFIERS), key=len, reverse=True))
_DEPT_ALT = "|".join(re.escape(d) for d in sorted(set(_DEPARTMENTS), key=len, reverse=True))
_ACR_ALT = "|".join(sorted(_TITLE_ACRONYMS, key=len, reverse=True))
_COMPLEMENT = rf"(?:{_DEPT_ALT})\b(?:\s+(?:(?:and|&)\s+)?(?:{_DEPT_ALT})\b){{0,3}}|(?-i:[A-Z][\w-]+)"
_TITLE_RE = re.compile(
    rf"\b(?P<mods>(?:(?:{_MOD_ALT})[\s-]+){{0,4}})"
    rf"(?P<role>(?:{_ROLE_ALT})|(?-i:(?:{_ACR_ALT})))\b"
    rf"(?P<comp>\s+of\s+(?:the\s+)?(?:{_COMPLEMENT})|\s+(?-i:(?=[A-Z]))(?:{_DEPT_ALT})\b)?",
    re.IGNORECASE,
)

# Failed or unfinished steps. Found first, so "did not finish" is unfinished
# rather than a prohibition.
_UNFINISHED_VERBS = (
    "finish|complete|pass|succeed|work|run|start|deploy|go\\s+through|load|sync|arrive|get|receive|"
    "install|migrate|build|compile|respond|reply|land|merge|ship|happen|resolve|apply|upload|download|"
    "save|send|connect|boot|restore|update|upgrade|sign|pay|finalise|finalize"
)
_UNFINISHED_RE = re.compile(
    rf"""\b(?:
        fail(?:ed|s|ing|ures?)?
      | did(?:\s+not|{_NT})\s+(?:yet\s+)?(?:{_UNFINISHED_VERBS})\w*
      | could(?:\s+not|{_NT})
      | (?:unable|failing)\s+to
      | (?:has|have|had)(?:\s+not|{_NT})\s+(?:yet\s+)?(?:been\s+)?
          (?:\w+ed|done|paid|sent|built|run|begun|made|seen|written|taken|given|heard|got|gotten|found)
      | not\s+(?:yet|been\s+\w+ed|finished|completed|done|started|resolved|fixed|merged|deployed|
          approved|paid|received|sent|ready|complete|working|set\s+up)
      | (?:yet|still)\s+to\s+\w+
      | still\s+(?:pending|open|waiting|running|blocked|broken|failing|missing|outstanding|unresolved|
          in\s+progress|not\s+\w+|\w+ing)
      | pending|blocked|blockers?|incomplete|unfinished|unresolved|unpaid|in\s+progress
      | timed\s+out|crash(?:ed|es)?|errored|broken|rolled\s+back|abort(?:ed)?|stalled|stuck
      | half[-\s]done|partially|to-do|todo|(?-i:TBD|WIP)
      | (?:is|are|was|were)(?:\s+not|{_NT})\s+working|(?:does|do)(?:\s+not|{_NT})\s+work
      | waiting\s+(?:on|for)|awaiting
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)
# Prohibitions whose object comes first ("Weekend calls are off limits"):
# the clause is the whole segment around them.
_POST_PROHIBITION_RE = re.compile(
    r"\b(?:(?:is|are|was|were|be)\s+)?(?:not\s+(?:allowed|permitted)|prohibited|forbidden|banned"
    r"|off[-\s]limits|not\s+an\s+option)\b",
    re.IGNORECASE,
)
# Prohibitions and negations that come before what they negate: the clause
# runs from the trigger to the end of its segment.
_PROHIBITION_RE = re.compile(
    rf"""(?:\b(?:
        (?:do|does|did)(?:\s+not|{_NT})
      | never|no\s+longer|no\s+more|under\s+no\s+circumstances|refrain\s+from|avoid(?:ing)?
      | (?:must|should|would|need)(?:\s+not|{_NT}|\s+never)|shall\s+not|shan['\u2019]?t|may\s+not|might\s+not
      | can(?:\s*not)|ca{_NT}|won['\u2019]?t|will\s+not|ain['\u2019]?t
      | (?:is|are|was|were|am)(?:\s+not|{_NT})
      | (?:please\s+|to\s+)?stop(?=\s+(?:\w+ing|all|any|the)\b)
      | no(?=\s+(?:\w+ing|calls?|emails?|e-mails?|texts?|messages?|contact|meetings?|deploy(?:s|ments?)?
          |releases?|changes?|access|alcohol|sugar|meat|pork|nuts|dairy|gluten|visits?|visitors|refunds?
          |discounts?|exceptions?|overtime|pushes|merges)\b)
      | not(?!\s+(?:only|just)\b)
    )\b)""",
    re.IGNORECASE | re.VERBOSE,
)
# Where a clause ends: sentence punctuation, brackets, dashes, a comma, or a
# conjunction that starts another thought.
_BOUNDARY_RE = re.compile(
    r"[.!?;:](?=\s|$)|\n|[()\[\]{}\u2013\u2014]|,(?=\s)|\s-\s"
    r"|\s(?:but|because|although|though|whereas|while|so|which|however)\b"
    r"|\s(?:and|or)\s+(?=(?:i|we|you|he|she|they|it|then|also|later|afterwards)\b)",
    re.IGNORECASE,
)
_MAX_CLAUSE_WORDS = 12

# What counts as a negation or an unfinished marker in a summary sentence.
# Broader than the source triggers on purpose: the summary may reword.
_SUMMARY_NEGATION_RE = re.compile(
    r"\b(?:not|never|no|none|nobody|nothing|neither|nor|without|avoid\w*|stop\w*|refrain\w*|prohibit\w*"
    r"|forbid\w*|ban|bans|banned|off[-\s]limits|against|refus\w*|declin\w*|opt(?:ed|s)?[-\s]out"
    r"|unsubscrib\w*|cannot|dont|doesnt|didnt|wont|cant|mustnt|shouldnt|isnt|arent|wasnt|werent)\b"
    r"|\b\w+n['\u2019]t\b",
    re.IGNORECASE,
)
_SUMMARY_UNFINISHED_RE = re.compile(
    r"\b(?:fail\w*|unfinish\w*|incomplete|not|never|pending|yet|still|block\w*|todo|to-do|tbd|wip"
    r"|unable|error\w*|broke\w*|crash\w*|timed\s+out|timeout|rolled\s+back|rollback|abort\w*|unresolved"
    r"|open|outstanding|await\w*|waiting|partial\w*|progress|stall\w*|stuck|unsuccessful\w*|cancel\w*"
    r"|remaining|remains|unpaid|retry|retrying)\b|\b\w+n['\u2019]t\b",
    re.IGNORECASE,
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD_RE = re.compile(r"\w+(?:[-'\u2019.@/:+]\w+)*")
# At most four joined parts ("Jean-Luc", "O'Brien-Smith"): a longer chain is
# not one name, and bounding it lets the summary side index its name words.
_MAX_NAME_PARTS = 4
_NAME_WORD_RE = re.compile(rf"[^\W\d_]+(?:['\u2019-][^\W\d_]+){{0,{_MAX_NAME_PARTS - 1}}}")
_SUMMARY_WORD_RUN_RE = re.compile(r"\w+")
_NON_SPACE_RE = re.compile(r"\S+")


# ---------------------------------------------------------------------------
# Extraction


class _Item(NamedTuple):
    # A named tuple rather than a frozen dataclass: a long text makes tens of
    # thousands of these, and a frozen dataclass is several times slower to build.
    category: str
    start: int
    end: int
    # What "carried" is decided on: a number's value, a date's parts, a
    # clause's key words, a name's significant words...
    key: Any


def _extract(text: str) -> list[_Item]:
    atoms = _resolve_overlaps(
        [
            *_find_identifiers(text),
            *_find_dates(text),
            *_find_titles(text),
            *_find_numbers(text),
        ]
    )
    taken = _Spans()
    for atom in atoms:
        taken.add(atom.start, atom.end)
    names = [n for n in _find_names(text) if not taken.overlaps(n.start, n.end)]
    return sorted([*atoms, *names, *_find_clauses(text)], key=lambda i: (i.start, i.end))


_PRIORITY = {"identifier": 0, "date": 1, "title": 2, "number": 3, "name": 4}


def _resolve_overlaps(candidates: list[_Item]) -> list[_Item]:
    # Longest first, then by category priority: "eu-west-2" is one identifier,
    # not a region plus the number 2; "3 March 2025" is one date.
    ordered = sorted(candidates, key=lambda c: (-(c.end - c.start), _PRIORITY[c.category], c.start))
    accepted: list[_Item] = []
    spans = _Spans()
    for cand in ordered:
        if cand.end > cand.start and not spans.overlaps(cand.start, cand.end):
            spans.add(cand.start, cand.end)
            accepted.append(cand)
    return accepted


class _Spans:
    """Non-overlapping ``[start, end)`` spans with logarithmic overlap checks.

    A session's source text can be a long transcript with thousands of items;
    comparing every pair would be quadratic.
    """

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def overlaps(self, start: int, end: int) -> bool:
        k = bisect.bisect_right(self._starts, start)
        if k > 0 and self._ends[k - 1] > start:
            return True
        return k < len(self._starts) and self._starts[k] < end

    def around(self, pos: int) -> tuple[int, int]:
        """End of the last span before ``pos`` and start of the next one after it."""
        k = bisect.bisect_right(self._starts, pos)
        prev_end = self._ends[k - 1] if k > 0 else 0
        next_start = self._starts[k] if k < len(self._starts) else sys.maxsize
        return prev_end, next_start

    def add(self, start: int, end: int) -> None:
        k = bisect.bisect_left(self._starts, start)
        self._starts.insert(k, start)
        self._ends.insert(k, end)


def _find_identifiers(text: str) -> list[_Item]:
    found = [
        _Item("identifier", m.start(), m.end(), _norm_identifier(m.group()))
        for pattern in _IDENTIFIER_PATTERNS
        for m in pattern.finditer(text)
    ]
    for m in _VERSION_AFTER_WORD.finditer(text):
        found.append(_Item("identifier", m.start("v"), m.end("v"), _norm_identifier(m.group("v"))))
    return found


_URL_PREFIX_RE = re.compile(r"(?:https?://)?(?:www\.)?")
_VERSION_PREFIX_RE = re.compile(r"v(?=\d)")


def _norm_identifier(value: str) -> str:
    value = value.casefold()
    value = value[_URL_PREFIX_RE.match(value).end() :]  # type: ignore[union-attr]  # both parts optional: always matches
    if _VERSION_PREFIX_RE.match(value):
        value = value[1:]
    return value.rstrip("/.,")


def _date_key(kind: str, m: re.Match[str], text: str) -> dict[str, Any] | None:
    groups = {k: v for k, v in m.groupdict().items() if v is not None}
    key: dict[str, Any] = {}
    if "y" in groups:
        year = int(groups["y"])
        key["year"] = year + 2000 if year < 100 else year
    if kind == "iso":
        key["month"], key["day"] = int(groups["m"]), int(groups["d"])
        if "H" in groups:
            key["time"] = f"{int(groups['H']):02d}:{groups['M']}"
    elif kind == "numeric":
        key["numeric"] = (int(groups["a"]), int(groups["b"]))
    if "mon" in groups:
        word = groups["mon"]
        # "may" and "march" are verbs unless capitalised and in date context.
        if word.casefold() in _AMBIGUOUS_MONTHS:
            if not word[0].isupper():
                return None
            bare = kind == "month" and "pre" not in groups and "y" not in groups
            if bare and not _MONTH_CONTEXT.search(text[max(0, m.start() - 20) : m.start()]):
                return None
        # .get: IGNORECASE also matches look-alikes ("\u0130" for "i") that
        # casefold to something else; such a match is not a month.
        month = _MONTHS.get(word.casefold())
        if month is None:
            return None
        key["month"] = month
    if "d" in groups and kind != "iso":
        key["day"] = int(groups["d"])
    if "wd" in groups:
        key["weekday"] = groups["wd"].casefold()
    if "rel" in groups:
        rel = re.sub(r"\s+", " ", groups["rel"].casefold()).removeprefix("the ")
        rel = rel.replace("end of the ", "end of ")
        key["rel"] = _RELATIVE_ALIASES.get(rel, rel)
    if "q" in groups:
        key["quarter"] = groups["q"].upper()
    if kind == "time":
        hour = int(groups["H"]) % 12 + (12 if groups["ap"].casefold().startswith("p") else 0)
        key["time"] = f"{hour:02d}:{groups.get('M', '00')}"
    elif kind == "time24":
        key["time"] = f"{int(groups['H']):02d}:{groups['M']}"
    elif kind == "timeword":
        key["time"] = "00:00" if groups["tw"].casefold() == "midnight" else "12:00"
    if "tz" in groups:
        key["tz"] = groups["tz"].upper()
    if not _plausible(key):
        return None
    return key


def _plausible(key: Mapping[str, Any]) -> bool:
    if "month" in key and not 1 <= key["month"] <= 12:
        return False
    if "day" in key and not 1 <= key["day"] <= 31:
        return False
    if "numeric" in key:
        a, b = key["numeric"]
        if not (1 <= a <= 31 and 1 <= b <= 31 and min(a, b) <= 12):
            return False
    return not ("time" in key and int(key["time"][:2]) > 23)


_WEEKDAY_WORDS = frozenset(_WEEKDAYS)
# Words that can start a match of the date patterns built on word
# alternations (see _matches_at_words); the others start with a digit or are
# cheap for the regex engine already.
_DATE_FIRST_WORDS: dict[str, tuple[frozenset[str], bool]] = {
    "day_month": (_WEEKDAY_WORDS | {"the"}, True),
    "month_day": (_WEEKDAY_WORDS | frozenset(_MONTHS), False),
    "month": (frozenset({"early", "mid", "late", "end", "start", "beginning", *_MONTHS}), False),
    "weekday": (
        frozenset({"next", "this", "last", "coming", "every", *_WEEKDAYS, *(d + "s" for d in _WEEKDAYS)}),
        False,
    ),
    "relative": (
        _words("tomorrow tonight yesterday overnight next last this coming the end weekend weekends")
        | _words("eod eow eom eoq eoy cob"),
        False,
    ),
}


def _find_dates(text: str) -> list[_Item]:
    found: list[_Item] = []
    for kind, pattern in _DATE_PATTERNS:
        first = _DATE_FIRST_WORDS.get(kind)
        matches = pattern.finditer(text) if first is None else _matches_at_words(pattern, text, *first)
        for m in matches:
            key = _date_key(kind, m, text)
            if key is not None:
                found.append(_Item("date", m.start(), m.end(), key))
    return found


def _number_value(m: re.Match[str]) -> float | None:
    groups = m.groupdict()
    num = groups.get("num")
    if num is not None:
        # The common case, a bare whole number, without the string work.
        if not groups["frac"] and not groups["suf"]:
            return float(num.replace(",", "")) if "," in num else float(num)
        suffix = (groups["suf"] or "").strip()
        value = float(num.replace(",", "") + (groups["frac"] or ""))
        return value * _SCALES.get(suffix, 1.0)
    # .get: IGNORECASE also matches look-alike letters that casefold to
    # something else; such a match is not a number word.
    if groups.get("tens") is not None:
        tens = _NUMBER_WORDS.get(m.group("tens").casefold())
        if tens is None:
            return None
        value = float(tens + _UNIT_VALUES.get((m.group("unit") or "").casefold(), 0))
    else:
        word = _NUMBER_WORDS.get(m.group("word").casefold())
        if word is None:
            return None
        value = float(word)
    # "twenty-five thousand" is one number, 25000, not 25 and 1000.
    return value * _NUMBER_WORDS.get((groups.get("scale") or "").casefold(), 1)


_NUMBER_FIRST_WORDS = (frozenset(_NUMBER_WORDS) - _FREQUENCY_WORDS) | frozenset(_TENS.split("|"))


def _find_numbers(text: str) -> list[_Item]:
    found: list[_Item] = []
    for matches in (_NUMBER_RE.finditer(text), _matches_at_words(_NUMBER_WORD_RE, text, _NUMBER_FIRST_WORDS)):
        for m in matches:
            value = _number_value(m)
            if value is not None:
                found.append(_Item("number", m.start(), m.end(), value))
    return found


def _title_words(text: str) -> frozenset[str]:
    words: set[str] = set()
    for raw in re.findall(r"[^\W_]+", text):
        expansion = _TITLE_ACRONYMS.get(raw.upper())
        lowered = raw.casefold()
        if expansion is None:
            expansion = _WORD_ABBREVIATIONS.get(lowered)
        for word in (expansion or lowered).split():
            if word not in {"of", "the", "and", "for"}:
                words.add(_stem(word))
    return frozenset(words)


# The word a title can start with. _TITLE_RE is a long case-insensitive
# alternation that the regex engine tries at every offset (a third of the
# check's time on a long text); trying it only at words that can start a
# title finds the same matches.
_TITLE_FIRST_WORDS = frozenset(
    word.split("-")[0].split()[0].casefold() for word in (*_ROLES, *_MODIFIERS, *_TITLE_ACRONYMS)
)


@dataclass(frozen=True)
class _WordIndex:
    by_word: dict[str, list[int]]  # casefolded word -> where it starts
    numbers: list[int]  # runs that start with a digit
    non_ascii: list[int]


@functools.lru_cache(maxsize=4)
def _word_index(text: str) -> _WordIndex:
    """Where each run of word characters starts, computed once per text."""
    by_word: dict[str, list[int]] = {}
    numbers: list[int] = []
    non_ascii: list[int] = []
    for m in _SUMMARY_WORD_RUN_RE.finditer(text):
        word = m.group()
        if not word.isascii():
            non_ascii.append(m.start())
        elif word[0].isdigit():
            numbers.append(m.start())
        else:
            by_word.setdefault(word.casefold(), []).append(m.start())
    return _WordIndex(by_word, numbers, non_ascii)


def _matches_at_words(
    pattern: re.Pattern[str], text: str, first_words: frozenset[str], digits: bool = False
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a pattern that starts at a word boundary
    with one of ``first_words`` (casefolded ASCII; or a number when ``digits``).

    The regex engine tries a long case-insensitive alternation at every
    offset; trying it only at the words that can start a match finds the
    same matches several times faster, which is what lets the check stay
    within its time budget on the longest accepted text.
    """
    index = _word_index(text)
    # Non-ASCII words are always tried: case-insensitive matching pairs some
    # letters ("\u212a" and "k") that casefold does not.
    starts = list(index.non_ascii)
    if digits:
        starts += index.numbers
    for word in first_words & index.by_word.keys():
        starts += index.by_word[word]
    starts.sort()
    resume = 0
    for start in starts:
        if start < resume:
            continue
        m = pattern.match(text, start)
        if m is not None and m.end() > m.start():
            resume = m.end()
            yield m


def _find_titles(text: str) -> list[_Item]:
    found: list[_Item] = []
    for m in _matches_at_words(_TITLE_RE, text, _TITLE_FIRST_WORDS):
        role = m.group("role").casefold()
        mods = m.group("mods").strip()
        comp = m.group("comp") or ""
        if role in _ROLES_NEEDING_MODIFIER and not mods:
            continue
        if role == "head" and not comp.strip().casefold().startswith("of"):
            continue
        found.append(_Item("title", m.start(), m.end(), _title_words(m.group())))
    return found


def _sentence_start(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and text[i] in " \t\"'\u201c\u201d\u2018\u2019([{*•>-":
        i -= 1
    if i < 0 or text[i] in "\n\r!?:":
        return True
    if text[i] == ".":
        before = re.search(r"(\w+)\.$", text[max(0, i - 10) : i + 1])
        # "Dr. Patel" and "J. Smith" do not start a sentence at "Patel".
        return not (
            before
            and (
                before.group(1).casefold() in _HONORIFICS
                or (len(before.group(1)) == 1 and before.group(1).isupper())
            )
        )
    return False


@dataclass
class _Tok:
    start: int
    end: int
    word: str
    kind: str  # "cap", "initial", "hon", "particle" or "other"
    possessive: bool = False


def _name_tokens(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    for m in _NAME_WORD_RE.finditer(text):
        word, start, end = m.group(), m.start(), m.end()
        possessive = False
        if word[-2:] in ("'s", "\u2019s"):
            word, end, possessive = word[:-2], end - 2, True
        lowered = word.casefold()
        if (lowered in _HONORIFICS or lowered in _PLACE_PREFIXES) and word[0].isupper():
            kind = "hon"
        elif lowered in _STREET_ABBREVIATIONS or _CONTRACTION.match(word):
            kind = "other"
        elif len(word) == 1 and word.isupper() and text[end : end + 1] == ".":
            kind = "initial"
        elif lowered in _NAME_PARTICLES and word.islower():
            kind = "particle"
        elif (
            word[0].isupper()
            and any(c.islower() for c in word)
            and lowered not in _NOT_NAMES
            and lowered.replace("\u2019", "'") not in _NOT_NAMES
        ):
            kind = "cap"
        else:
            kind = "other"
        toks.append(_Tok(start, end, word, kind, possessive))
    # "Will Turner", "May Chen": a first name that is also an ordinary word
    # counts when capitalised mid-sentence right before another name word.
    for tok, nxt in itertools.pairwise(toks):
        if (
            tok.kind == "other"
            and tok.word.casefold() in _WORDLIKE_NAMES
            and tok.word[:1].isupper()
            and nxt.kind == "cap"
            and re.fullmatch(r"[ \t]+", text[tok.end : nxt.start])
            and not _sentence_start(text, tok.start)
        ):
            tok.kind = "cap"
    return toks


def _find_names(text: str) -> list[_Item]:
    toks = _name_tokens(text)
    found: list[_Item] = []
    i = 0
    while i < len(toks):
        if toks[i].kind not in ("cap", "hon", "initial"):
            i += 1
            continue
        group = [toks[i]]
        j = i + 1
        while j < len(toks) and not group[-1].possessive:
            gap = text[group[-1].end : toks[j].start]
            period_ok = group[-1].kind in ("hon", "initial")
            if not re.fullmatch(r"\.?[ \t]+" if period_ok else r"[ \t]+", gap):
                break
            # A particle joins only between two name words ("Ludwig van Beethoven").
            particle = toks[j].kind == "particle" and j + 1 < len(toks) and toks[j + 1].kind == "cap"
            if particle or toks[j].kind in ("cap", "initial"):
                group.append(toks[j])
            else:
                break
            j += 1
        i = j
        following = toks[j].word.casefold() if j < len(toks) else ""
        item = _name_from_group(text, group, following)
        if item is not None:
            found.append(item)
    return found


def _name_from_group(text: str, group: list[_Tok], following: str) -> _Item | None:
    caps = [t for t in group if t.kind == "cap"]
    if not caps:
        return None
    has_honorific = group[0].kind == "hon"
    if not has_honorific and _sentence_start(text, group[0].start):
        first = group[0]
        if len(caps) >= 2:
            # "Meeting Alice", "Later Alice": without a dictionary, a
            # sentence-initial word that is not a known first name is taken
            # for an ordinary word ("Zanele Mokoena" is then found as
            # "Mokoena", still a name).
            if first.word.casefold() not in _FIRST_NAMES:
                group = group[1:]
        elif not (first.word.casefold() in _FIRST_NAMES or following in _REPORTING_VERBS or first.possessive):
            return None
    caps = [t for t in group if t.kind == "cap"]
    significant = [t.word for t in caps if t.word.casefold() not in _ORG_SUFFIXES] or [t.word for t in caps]
    return _Item("name", group[0].start, group[-1].end, tuple(significant))


def _find_clauses(text: str) -> list[_Item]:
    boundaries = [(m.start(), m.end()) for m in _BOUNDARY_RE.finditer(text)]
    # Word starts, once: counting the words before every trigger by scanning
    # its whole segment was quadratic on "not not not ..." without punctuation.
    word_starts = [m.start() for m in _NON_SPACE_RE.finditer(text)]
    starts = [b[0] for b in boundaries]
    ends = [b[1] for b in boundaries]

    def segment(pos: int) -> tuple[int, int]:
        k = bisect.bisect_right(ends, pos)
        seg_start = ends[k - 1] if k > 0 else 0
        k2 = bisect.bisect_left(starts, pos)
        seg_end = starts[k2] if k2 < len(starts) else len(text)
        return seg_start, seg_end

    clauses: list[_Item] = []
    taken = _Spans()

    def overlaps(pos: int, end: int) -> bool:
        return taken.overlaps(pos, end)

    def add(category: str, start: int, end: int, trig_start: int, trig_end: int) -> None:
        # Clauses never overlap: a later one stops where an earlier one starts.
        prev_end, next_start = taken.around(trig_start)
        start, end = _trim(text, max(start, prev_end), min(end, next_start))
        if end <= start:
            return
        words = _keywords(text[start:trig_start] + " " + text[trig_end:end])
        clauses.append(_Item(category, start, end, words))
        taken.add(start, end)

    def enclosing(m: re.Match[str]) -> tuple[int, int]:
        seg_start, seg_end = segment(m.start())
        # Keep a long segment to the words around the trigger.
        lo = bisect.bisect_left(word_starts, seg_start)
        hi = bisect.bisect_left(word_starts, m.start())
        # A segment that starts inside a word ("(abc") counts that word too.
        cut = (
            seg_start < m.start()
            and not text[seg_start].isspace()
            and word_starts[lo : lo + 1] != [seg_start]
        )
        if hi - lo + cut > _MAX_CLAUSE_WORDS:
            seg_start = word_starts[hi - _MAX_CLAUSE_WORDS]
        return seg_start, _cap_words(text, m.end(), seg_end)

    for m in _UNFINISHED_RE.finditer(text):
        if not overlaps(m.start(), m.end()):
            start, end = enclosing(m)
            add("unfinished", start, end, m.start(), m.end())
    for m in _POST_PROHIBITION_RE.finditer(text):
        if not overlaps(m.start(), m.end()):
            start, end = enclosing(m)
            add("prohibition", start, end, m.start(), m.end())
    for m in _PROHIBITION_RE.finditer(text):
        if not overlaps(m.start(), m.end()):
            _, seg_end = segment(m.start())
            add("prohibition", m.start(), _cap_words(text, m.end(), seg_end), m.start(), m.end())
    return clauses


def _cap_words(text: str, pos: int, seg_end: int) -> int:
    # Stops after the words it needs instead of reading the rest of the segment.
    words = _NON_SPACE_RE.finditer(text, pos, seg_end)
    ends = [w.end() for w in itertools.islice(words, _MAX_CLAUSE_WORDS + 1)]
    if len(ends) > _MAX_CLAUSE_WORDS:
        return ends[_MAX_CLAUSE_WORDS - 1]
    return seg_end


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    lead = re.match(r"(?:[\s,\"'\u201c\u2018*•-]|(?:and|or|then|so|also)\b)*", text[start:end], re.IGNORECASE)
    if lead:
        start += lead.end()
    while end > start and text[end - 1] in " \t\r\n,.;:!?\"'\u201d\u2019":
        end -= 1
    return start, end


# ---------------------------------------------------------------------------
# Words: light stemming, synonyms, key words of a clause


def _stem(word: str) -> str:
    # Just enough to match call/calls/calling/called and phone/phoned; not a
    # linguistic stemmer, and the same function runs on both sides.
    if not word.isalpha() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "ches", "shes", "xes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


_SYNONYMS: dict[str, str] = {_stem(word): _stem(group[0]) for group in _SYNONYM_GROUPS for word in group}


def _normalise_for_words(text: str) -> str:
    text = text.casefold().replace("\u2019", "'")

    # Times become one token ("6 pm", "6pm", "18:00" -> "18:00") so a clause's
    # time compares equal however it is written.
    def time_token(m: re.Match[str]) -> str:
        hour = int(m.group("H")) % 12 + (12 if m.group("ap").startswith("p") else 0)
        return f" {hour:02d}:{m.group('M') or '00'} "

    text = re.sub(
        r"(?<![\w.:])(?P<H>\d{1,2})(?::(?P<M>\d{2}))?\s?(?P<ap>[ap])(?:\.m\.|m\b)", time_token, text
    )
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)


def _canonical_words(text: str) -> list[str]:
    out: list[str] = []
    for token in _WORD_RE.findall(_normalise_for_words(text)):
        token = token.removesuffix("'s")
        if token in _NUMBER_WORDS:
            token = str(_NUMBER_WORDS[token])
        out.append(token)
    return out


def _keywords(text: str) -> frozenset[str]:
    words = set()
    for token in _canonical_words(text):
        if token in _FUNCTION_WORDS or token.endswith("n't") or token in {"dont", "doesnt", "didnt"}:
            continue
        stem = _stem(token)
        words.add(_SYNONYMS.get(stem, stem))
    return frozenset(words)


# ---------------------------------------------------------------------------
# The summary side


class _SummaryView:
    """Everything about the summary that the carried-checks look at, computed once."""

    def __init__(self, summary: str) -> None:
        self.text = summary
        self.identifier_text = re.sub(
            r"\bv(?=\d)", "", re.sub(r"(?:https?://)?(?:www\.)?", "", summary.casefold())
        )
        atoms = _resolve_overlaps(
            [
                *_find_identifiers(summary),
                *_find_dates(summary),
                *_find_titles(summary),
                *_find_numbers(summary),
            ]
        )
        self.dates = [a.key for a in atoms if a.category == "date"]
        self.numbers = {a.key for a in atoms if a.category == "number"}
        self.years = {d["year"] for d in self.dates if "year" in d}
        # Indexes, so that each source item costs a lookup rather than a scan
        # of the summary: comparing every source item with every summary item
        # (or searching the whole summary once per item) was quadratic.
        self.sorted_numbers = sorted(self.numbers | self.years)
        self.name_words, self.folded_name_words = _name_word_index(summary)
        self._dates_by_part: dict[tuple[str, Any], list[Mapping[str, Any]]] = {}
        self._dates_by_numeric: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
        self._dates_by_day_month: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
        for date in self.dates:
            for part in _ANCHORS:
                if part in date:
                    self._dates_by_part.setdefault((part, date[part]), []).append(date)
            if "numeric" in date:
                self._dates_by_numeric.setdefault(date["numeric"], []).append(date)
            if "day" in date and "month" in date:
                self._dates_by_day_month.setdefault((date["day"], date["month"]), []).append(date)
        self._date_cache: dict[frozenset[tuple[str, Any]], bool] = {}
        self._identifier_cache: dict[str, bool] = {}
        self.title_words = _title_words(summary)
        # Per sentence: its key words and the marker words found in it.
        self.sentences: list[tuple[frozenset[str], frozenset[str], frozenset[str]]] = []
        for sentence in _SENTENCE_SPLIT_RE.split(summary):
            if sentence.strip():
                self.sentences.append(
                    (
                        _keywords(sentence),
                        _markers(_SUMMARY_NEGATION_RE, sentence),
                        _markers(_SUMMARY_UNFINISHED_RE, sentence),
                    )
                )

    def carries_number(self, value: float) -> bool:
        # math.isclose is relative, so only the neighbours in sorted order can
        # be close enough.
        k = bisect.bisect_left(self.sorted_numbers, value)
        return any(math.isclose(value, other) for other in self.sorted_numbers[max(0, k - 1) : k + 1])

    def carries_date(self, key: Mapping[str, Any]) -> bool:
        cache_key = frozenset(key.items())
        if cache_key not in self._date_cache:
            candidates = self._date_candidates(key)
            self._date_cache[cache_key] = any(_date_matches(key, other) for other in candidates)
        return self._date_cache[cache_key]

    def _date_candidates(self, key: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        # Every summary date that _date_matches could accept: one sharing the
        # source's anchor value, or a numeric date readable as its day and month.
        if "numeric" in key:
            a, b = key["numeric"]
            return [
                *self._dates_by_numeric.get((a, b), ()),
                *self._dates_by_day_month.get((a, b), ()),
                *self._dates_by_day_month.get((b, a), ()),
            ]
        found: list[Mapping[str, Any]] = []
        if "day" in key and "month" in key:
            found += self._dates_by_numeric.get((key["day"], key["month"]), ())
            found += self._dates_by_numeric.get((key["month"], key["day"]), ())
        anchor = next((part for part in _ANCHORS if part in key), None)
        if anchor is not None:
            found += self._dates_by_part.get((anchor, key[anchor]), ())
        return found

    def carries_identifier(self, key: str) -> bool:
        if key not in self._identifier_cache:
            # str.find first: most dropped identifiers do not occur at all, and
            # it is much faster than a regex search with a lookbehind up front.
            carried = key in self.identifier_text and (
                re.search(rf"(?<![\w.-]){re.escape(key)}(?![\w-]|\.\w)", self.identifier_text) is not None
            )
            self._identifier_cache[key] = carried
        return self._identifier_cache[key]


def _name_word_index(summary: str) -> tuple[frozenset[str], frozenset[str]]:
    """Every run of up to four word parts joined by one apostrophe or hyphen.

    A name word is found in the summary exactly when it is one of these runs
    (a name word is letters in at most four such parts, and the runs start
    and end where a word does), as a whole-word search of the summary did.
    """
    runs = [(m.start(), m.end()) for m in _SUMMARY_WORD_RUN_RE.finditer(summary)]
    exact: set[str] = set()
    for i, (start, end) in enumerate(runs):
        exact.add(summary[start:end])
        for j in range(i + 1, min(i + _MAX_NAME_PARTS, len(runs))):
            if runs[j][0] - runs[j - 1][1] != 1 or summary[runs[j - 1][1]] not in "'\u2019-":
                break
            end = runs[j][1]
            exact.add(summary[start:end])
    return frozenset(exact), frozenset(word.casefold() for word in exact)


def _markers(pattern: re.Pattern[str], sentence: str) -> frozenset[str]:
    return frozenset(_stem(m.group().casefold()) for m in pattern.finditer(sentence))


def _carried(item: _Item, view: _SummaryView) -> bool:
    if item.category == "name":
        return any(_has_name_word(word, view) for word in item.key)
    if item.category == "title":
        return bool(item.key) and item.key <= view.title_words
    if item.category == "number":
        return view.carries_number(item.key)
    if item.category == "date":
        if set(item.key) == {"year"} and item.key["year"] in view.numbers:
            return True
        return view.carries_date(item.key)
    if item.category == "identifier":
        return view.carries_identifier(item.key)
    # Clauses: one summary sentence with the marker and half the key words.
    needed = math.ceil(len(item.key) / 2)
    for words, negations, unfinished in view.sentences:
        markers = negations if item.category == "prohibition" else unfinished
        # The marker must be a word of its own: in "investigated the crash" the
        # crash is the subject, not a sign that the step failed.
        if markers - item.key and len(item.key & words) >= needed:
            return True
    return False


def _has_name_word(word: str, view: _SummaryView) -> bool:
    folded = word.casefold()
    if folded in _WORDLIKE_NAMES:
        return word in view.name_words
    return folded in view.folded_name_words


_ANCHORS = ("time", "day", "weekday", "month", "quarter", "year", "rel")


def _date_matches(source: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    if "numeric" in source:
        # 03/04/2025 may be 3 April or 4 March: either reading carries it.
        a, b = source["numeric"]
        readings = {(a, b), (b, a)}
        same = other.get("numeric") == (a, b) or (other.get("day"), other.get("month")) in readings
        return same and bool(other.get("year", source.get("year")) == source.get("year"))
    if "numeric" in other:
        a, b = other["numeric"]
        if (source.get("day"), source.get("month")) in {(a, b), (b, a)}:
            return bool(source.get("year", other.get("year")) == other.get("year"))
    anchor = next((part for part in _ANCHORS if part in source), None)
    if anchor is None or anchor not in other:
        return False
    return all(other[part] == value for part, value in source.items() if part in other)
