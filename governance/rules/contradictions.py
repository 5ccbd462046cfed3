"""Contradictions without a key (R6, R18): two statements giving one attribute two values. Pure: no ORM.

Agents rarely send a key. "I use Python for most of my work." and, a month
later, "I've switched to Rust." are both unkeyed, yet they answer the same
question about the same person differently. This module recognises that from
the text alone:

1. **Key inference.** A vocabulary of common attributes (programming language,
   city of residence, country, employer, role, cloud region, time zone, the
   version of a named product, and preference targets such as editor,
   operating system, theme, contact channel and reply language), each with
   the words that cue it and the values it takes.
2. **Value extraction.** Each clause of a statement yields ``Claim``s: the
   attribute, whom it is about (the principal or project itself, or a third
   party such as "my sister" or "the CI image"), the values, the scope it is
   limited to ("for scripts"), and whether it is negated ("no longer") or
   additive ("also", "too").
3. **Conflict.** Two claims conflict when they are about the same attribute
   of the same subject, in overlapping scopes, and give disjoint values (or
   one affirms what the other denies). Different people, different products'
   versions, and different scopes ("Python for scripts" / "Rust for
   services") are not conflicts; wrongly suppressing a true statement is
   worse than keeping two, so anything the vocabulary does not recognise is
   left alone.

What happens to a conflict is not decided here: the write path applies the
supersession rules (authority, time order, independence) and retrieval keeps
only the newer side of a pair that is still active (``conflict_lost``).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from governance.rules import identifiers

SELF = "self"
MAX_STATEMENT = 4000
MAX_CLAUSE = 300
MAX_CLAUSES = 20

# --- vocabularies ---------------------------------------------------------

# Canonical value -> spellings (matched case-insensitively on word boundaries).
# "Go" is matched only capitalised or as "golang": the verb would otherwise
# turn every "I go to the gym" into a language claim.
LANGUAGES: Mapping[str, tuple[str, ...]] = {
    "python": ("python",),
    "rust": ("rust",),
    "go": ("golang",),
    "java": ("java",),
    "javascript": ("javascript", "js"),
    "typescript": ("typescript", "ts"),
    "kotlin": ("kotlin",),
    "swift": ("swift",),
    "ruby": ("ruby",),
    "php": ("php",),
    "c#": ("c#", "csharp"),
    "c++": ("c++", "cpp"),
    "scala": ("scala",),
    "elixir": ("elixir",),
    "haskell": ("haskell",),
    "clojure": ("clojure",),
    "perl": ("perl",),
    "julia": ("julia",),
    "dart": ("dart",),
    "lua": ("lua",),
    "zig": ("zig",),
    "ocaml": ("ocaml",),
    "f#": ("f#",),
}
PRODUCTS: Mapping[str, tuple[str, ...]] = {
    "postgresql": ("postgresql", "postgres", "pg"),
    "mysql": ("mysql",),
    "mariadb": ("mariadb",),
    "redis": ("redis",),
    "mongodb": ("mongodb", "mongo"),
    "elasticsearch": ("elasticsearch",),
    "kafka": ("kafka",),
    "node": ("node.js", "nodejs", "node"),
    "python": ("python",),
    "java": ("java", "jdk"),
    "go": ("go", "golang"),
    "ruby": ("ruby",),
    "php": ("php",),
    "rust": ("rust",),
    "django": ("django",),
    "rails": ("rails",),
    "react": ("react",),
    "angular": ("angular",),
    "vue": ("vue",),
    "kubernetes": ("kubernetes", "k8s"),
    "terraform": ("terraform",),
    "ubuntu": ("ubuntu",),
    "debian": ("debian",),
    "nginx": ("nginx",),
    ".net": (".net", "dotnet"),
    "spring boot": ("spring boot",),
    "ios": ("ios",),
    "android": ("android",),
    "windows": ("windows",),
    "macos": ("macos",),
    "openssl": ("openssl",),
    "gcc": ("gcc",),
    "xcode": ("xcode",),
    "webpack": ("webpack",),
}
COUNTRIES = frozenset(
    """uk|united kingdom|britain|england|scotland|wales|ireland|northern ireland|france|germany|spain|
    italy|netherlands|belgium|portugal|switzerland|austria|sweden|norway|denmark|finland|poland|
    czechia|greece|usa|us|united states|america|canada|mexico|brazil|argentina|australia|
    new zealand|india|japan|china|korea|south korea|singapore|israel|turkey|egypt|nigeria|kenya|
    south africa|ukraine|romania|hungary""".replace("\n", "")
    .replace(" ", " ")
    .split("|")
)
ROLE_NOUNS = frozenset(
    """engineer|developer|programmer|manager|designer|analyst|scientist|director|lead|architect|
    consultant|teacher|nurse|doctor|physician|student|researcher|administrator|admin|writer|editor|
    accountant|lawyer|officer|founder|cto|ceo|cfo|coo|vp|intern|tester|technician|specialist|
    coordinator|recruiter|marketer|salesperson|product owner|owner|freelancer|contractor|
    professor|lecturer|pharmacist|sre|devops""".replace("\n", "")
    .replace(" ", "")
    .split("|")
)
EDITORS: Mapping[str, tuple[str, ...]] = {
    "vim": ("vim", "neovim", "nvim"),
    "emacs": ("emacs",),
    "vs code": ("vs code", "vscode", "visual studio code"),
    "intellij": ("intellij",),
    "pycharm": ("pycharm",),
    "sublime text": ("sublime", "sublime text"),
    "nano": ("nano",),
    "helix": ("helix",),
    "zed": ("zed",),
}
OPERATING_SYSTEMS: Mapping[str, tuple[str, ...]] = {
    "macos": ("macos", "mac", "macbook", "os x"),
    "windows": ("windows",),
    "linux": ("linux", "ubuntu", "fedora", "debian", "arch linux", "mint"),
}
THEMES: Mapping[str, tuple[str, ...]] = {
    "dark": ("dark mode", "dark theme"),
    "light": ("light mode", "light theme"),
}
CHANNELS: Mapping[str, tuple[str, ...]] = {
    "email": ("email", "e-mail", "mail"),
    "phone": ("phone", "call", "calls", "telephone"),
    "text message": ("sms", "text message", "text messages", "texts"),
    "slack": ("slack",),
    "teams": ("teams",),
    "whatsapp": ("whatsapp",),
    "telegram": ("telegram",),
    "signal": ("signal",),
}
SPOKEN: Mapping[str, tuple[str, ...]] = {
    name: (name,)
    for name in (
        "english",
        "french",
        "german",
        "spanish",
        "italian",
        "portuguese",
        "dutch",
        "japanese",
        "chinese",
        "mandarin",
        "korean",
        "arabic",
        "hindi",
        "polish",
        "swedish",
        "turkish",
        "russian",
        "ukrainian",
    )
}
UNITS: Mapping[str, tuple[str, ...]] = {"metric": ("metric",), "imperial": ("imperial",)}
INDENTATION: Mapping[str, tuple[str, ...]] = {"tabs": ("tabs",), "spaces": ("spaces",)}

# Scopes a language claim may be limited to, with their canonical name.
SCOPES: Mapping[str, str] = {
    "script": "scripts",
    "scripts": "scripts",
    "scripting": "scripts",
    "automation": "scripts",
    "service": "services",
    "services": "services",
    "microservices": "services",
    "backend": "backend",
    "back-end": "backend",
    "server": "backend",
    "servers": "backend",
    "frontend": "frontend",
    "front-end": "frontend",
    "ui": "frontend",
    "web": "web",
    "website": "web",
    "mobile": "mobile",
    "app": "mobile",
    "apps": "mobile",
    "data": "data",
    "analysis": "data",
    "analytics": "data",
    "notebooks": "data",
    "ml": "machine learning",
    "infrastructure": "infrastructure",
    "infra": "infrastructure",
    "tests": "tests",
    "testing": "tests",
    "games": "games",
    "game": "games",
    "embedded": "embedded",
    "firmware": "embedded",
    "cli": "tools",
    "tools": "tools",
    "tooling": "tools",
    "prototypes": "prototypes",
    "prototyping": "prototypes",
    "hobby": "hobby",
    "side": "hobby",
    "personal": "hobby",
    "homework": "study",
    "coursework": "study",
    "class": "study",
    "course": "study",
}

_NOT_PLACES = frozenset(
    s
    for vocab in (LANGUAGES, PRODUCTS, EDITORS, OPERATING_SYSTEMS, CHANNELS, SPOKEN)
    for v in vocab.values()
    for s in v
) | frozenset({"go"})

# Which attribute a key names: every word set listed must share a word with the key.
KEY_ATTRIBUTES: tuple[tuple[str, frozenset[str]], ...] = (
    ("programming_language", frozenset({"language", "languages", "lang", "stack"})),
    ("city", frozenset({"city", "town", "location", "residence", "home", "hometown"})),
    ("country", frozenset({"country"})),
    ("employer", frozenset({"employer", "company", "workplace", "organisation", "organization"})),
    ("role", frozenset({"role", "job", "title", "position", "occupation", "profession"})),
    ("region", frozenset({"region"})),
    ("timezone", frozenset({"timezone", "tz", "zone"})),
    ("editor", frozenset({"editor", "ide"})),
    ("operating_system", frozenset({"os", "operating", "platform"})),
    ("ui_theme", frozenset({"theme"})),
    ("contact_channel", frozenset({"contact", "channel"})),
)

# --- patterns -------------------------------------------------------------

_CLAUSE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\s*;\s*|,?\s+but\s+|,?\s+whereas\s+|,?\s+while\s+", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:no longer|not anymore|any ?more|don't|do not|doesn't|does not|never|stopped|quit|"
    r"used to|left|gave up|dropped|moved away from|not)\b",
    re.IGNORECASE,
)
_ADDITIVE = re.compile(r"\b(?:also|too|as well|in addition|additionally|alongside|besides)\b", re.IGNORECASE)
_FUTURE = re.compile(
    r"\b(?:will|going to|plan(?:s|ning)? to|want(?:s)? to|hope(?:s)? to|might|considering|"
    r"thinking about|next (?:month|year|week)|soon|moving to|relocating to|would like to)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:i think|maybe|perhaps|probably|not sure|i guess|possibly|sometimes|occasionally|"
    r"i believe|apparently|seems?)\b",
    re.IGNORECASE,
)
_FROM_TO = re.compile(r"\bfrom\s+(?P<old>.+?)\s+to\s+(?P<new>.+)$", re.IGNORECASE)
_INSTEAD = re.compile(
    r"\b(?:instead of|rather than|over|replacing|replaced)\s+(?P<old>[^,.;]+)", re.IGNORECASE
)
_VERSION = (
    r"v?(?P<version>\d+(?:\.\d+){0,2})"
    r"(?![\d.]*\s*(?:%|percent|gb|mb|ms|s\b|seconds|minutes|hours|days|years|users|people))"
)
_REGION = re.compile(
    r"\b(?:(?:us|eu|ap|sa|ca|me|af|il|mx)-(?:gov-)?(?:east|west|north|south|central|northeast|southeast|"
    r"northwest|southwest)-\d|(?:us|europe|asia|australia|southamerica|northamerica|me)-"
    r"(?:east|west|north|south|central|northeast|southeast|northwest|southwest)\d)\b",
    re.IGNORECASE,
)
_TZ = re.compile(
    r"\b(?P<tz>(?:utc|gmt)\s*[+-]\s*\d{1,2}(?::?\d{2})?|[A-Z][a-z]+/[A-Z][A-Za-z_]+|"
    r"pst|pdt|est|edt|cst|cdt|mst|mdt|cet|cest|bst|ist|jst|aest|aedt|eet|eest|wet|west|utc|gmt)\b",
    re.IGNORECASE,
)
_TZ_CUE = re.compile(r"\b(?:time ?zone|tz|hours are|working hours)\b", re.IGNORECASE)
_LANG_CUE = re.compile(
    r"\b(?:use|uses|used|using|write|writes|writing|wrote|written|code|codes|coding|program|programs|"
    r"programming|develop|develops|developing|switched|switch|switching|moved|migrated|migrating|"
    r"prefer|prefers|preferred|favou?rite|language|languages|work in|works in|working in|build|builds|"
    r"building|rewrote|rewrite|rewriting|rewritten|ported|stack|mostly in|all in)\b",
    re.IGNORECASE,
)
_PLACE = r"(?P<place>[A-Z][\w'\-]+(?:(?:\s+|-)(?:[A-Z][\w'\-]+|upon|on|de|la|le)){0,3})"
_RESIDENCE = re.compile(
    r"\b(?:live|lives|living|lived|reside|resides|residing|based|located|moved|relocated|settled|"
    r"home is|house is|flat is|apartment is|stay|stays|staying)\b(?:\s+(?:now|currently|here|back|"
    r"permanently|full[- ]time|over))?(?:[^.;]*?\bfrom\s+[A-Z][\w'\-]+(?:\s+[A-Z][\w'\-]+)*)?"
    r"\s+(?:in|to|at|near)\s+(?:the\s+)?" + _PLACE
)
_RESIDENCE_CUE = re.compile(
    r"\b(?:live|lives|living|reside|resides|based|located|moved|relocated|settled|home)\b", re.IGNORECASE
)
_ORG = r"(?P<org>[A-Z][\w&'.\-]*(?:\s+(?:[A-Z][\w&'.\-]*|&|of))*)"
_EMPLOYER = re.compile(
    r"\b(?:(?i:work|works|working|worked|employed|am|i'm|is)\s+(?i:at|for|by)|(?i:joined|join|joining)|"
    r"(?i:employer|company)\s+(?i:is)|(?i:job)\s+(?i:at)|(?i:hired by)|(?i:left))\s+(?:(?i:the)\s+)?" + _ORG
)
_NOT_ORG = frozenset(
    {
        "home",
        "myself",
        "i",
        "a",
        "an",
        "the",
        "my",
        "our",
        "we",
        "it",
        "this",
        "that",
        "now",
        "night",
        "weekends",
    }
)
_ROLE = re.compile(
    r"\b(?:i am|i'm|im|i work as|work as|works as|working as|she is|he is|they are|user is|is|"
    r"promoted to|(?:role|job|title|position|occupation) is|became|become|now)\s+(?:now\s+)?"
    r"(?:(?:a|an|the)\s+)?(?P<role>(?:[a-z][\w\-]*\s+){0,3}?(?:"
    + "|".join(sorted(ROLE_NOUNS, key=len, reverse=True))
    + r"))\b",
    re.IGNORECASE,
)
_PREF_CUE = re.compile(
    r"\b(?:prefer|prefers|preferred|preference|favou?rite|like|likes|use|uses|using|switched|switch|"
    r"moved|want|wants|always|only|set to|choose|chose|rather)\b",
    re.IGNORECASE,
)
_CONTACT_CUE = re.compile(
    r"\b(?:contact|contacted|reach|reached|message|get in touch|ping|notify|notified|notifications?|"
    r"prefer|prefers|preferred)\b",
    re.IGNORECASE,
)
_REPLY_CUE = re.compile(
    r"\b(?:respond|reply|replies|answer|answers|write to me|talk to me|speak to me|communicate|"
    r"responses|preferred language|language preference)\b",
    re.IGNORECASE,
)
_UNITS_CUE = re.compile(r"\b(?:units?|measurements?|system)\b", re.IGNORECASE)
_INDENT_CUE = re.compile(r"\b(?:indent|indents|indentation|indenting)\b", re.IGNORECASE)


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that only say who speaks, how, or when; what is left names a third party.
_SUBJECT_NOISE = _wordset(
    """
    i i'm im i've i'd me my mine myself we we're we've our ours us you your the a an user user's
    users customer customer's person principal they they're their them he she his her him it its
    now currently also still recently just mostly mainly primarily actually really today lately
    these days and but so then that which who mentioned said says say told tells reported
    reports confirmed confirms noted notes explained wrote stated states has have had am is are
    was were been be being do does did don't doesn't no not never longer any anymore more all
    most some of for in on at to with by from as since only always usually generally full time
    fully finally officially pretty very here there home
    """
)
_THIRD_PARTY = _wordset(
    """
    wife husband partner spouse girlfriend boyfriend sister brother sibling mother father mom
    mum dad parent parents son daughter kid kids child children friend friends colleague
    colleagues coworker coworkers co-worker manager boss team teammate neighbour neighbor
    roommate flatmate client clients cousin aunt uncle grandmother grandfather grandma grandpa
    niece nephew fiance fiancee
    """
)
_VERB_WORDS = _wordset(
    """
    use uses used using run runs running ran is on upgraded upgrade upgrading pinned pin pins
    built build builds requires require needs targets target deploys deploy deployed deploying
    ships ship moved move migrated migrate switched switch lives live living works work working
    writes write writing codes code prefers prefer preferred likes like based located relocated
    settled resides reside joined join joining left program programs programming employer
    company role job title position occupation time zone timezone mostly indent indents
    installed contact contacted reach notifications should please reply respond think guess
    believe suppose written wrote rewritten rewrote rewrite ported port was were been has have had
    """
)


@dataclass(frozen=True)
class Claim:
    """One attribute-value assertion found in a statement."""

    attribute: str
    subject: str  # SELF, or a third party's words ("sister", "ci image")
    values: frozenset[str]
    scope: str = ""  # "" is unscoped: the claim holds in general
    negated: bool = False
    additive: bool = False
    hedged: bool = False


@dataclass(frozen=True)
class Contradiction:
    """Why two statements cannot both be current, for a reviewer and for the write path."""

    attribute: str
    new_values: frozenset[str]
    old_values: frozenset[str]
    certain: bool  # False when either side hedges ("I think", "maybe"): keep both, let a person decide

    def detail(self) -> str:
        new = ", ".join(sorted(self.new_values)) or "something else"
        old = ", ".join(sorted(self.old_values)) or "something else"
        what = ATTRIBUTE_LABELS.get(self.attribute, _label(self.attribute))
        return f"Gives a different {what} ({new} instead of {old})."


ATTRIBUTE_LABELS: Mapping[str, str] = {
    "programming_language": "programming language",
    "city": "city of residence",
    "country": "country of residence",
    "employer": "employer",
    "role": "role",
    "region": "region",
    "timezone": "time zone",
    "editor": "editor",
    "operating_system": "operating system",
    "ui_theme": "display theme",
    "contact_channel": "way to be contacted",
    "reply_language": "language for replies",
    "units": "measurement units",
    "indentation": "indentation",
}


def _label(attribute: str) -> str:
    if attribute.startswith("version:"):
        return f"version of {attribute.removeprefix('version:')}"
    return attribute.replace("_", " ")


# --- extraction -----------------------------------------------------------


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'")


def clauses(statement: str) -> list[str]:
    """Sentences and contrastive halves ("..., but ..."), each judged on its own."""
    parts = _CLAUSE_SPLIT.split(_nfkc(statement[:MAX_STATEMENT]))
    # A clause longer than a sentence is not a claim anyone reads as one; the
    # cut also keeps every pattern linear on hostile text.
    return [c.strip()[:MAX_CLAUSE] for c in parts if c and c.strip()][:MAX_CLAUSES]


def _alternation(spellings: Iterable[str]) -> str:
    parts = sorted(spellings, key=len, reverse=True)
    return "|".join(re.escape(p).replace(r"\ ", r"\s+") for p in parts)


def _vocab_pattern(vocab: Mapping[str, tuple[str, ...]]) -> re.Pattern[str]:
    return re.compile(
        r"(?<![\w#+.])(?:" + _alternation(s for v in vocab.values() for s in v) + r")(?![\w#+])",
        re.IGNORECASE,
    )


def _canonical(vocab: Mapping[str, tuple[str, ...]], found: str) -> str:
    folded = " ".join(found.casefold().split())
    for name, spellings in vocab.items():
        if folded in spellings:
            return name
    return folded


_LANG_RE = _vocab_pattern(LANGUAGES)
_GO_RE = re.compile(r"(?<![\w#+.])Go(?![\w#+])")
_PRODUCT_RE = re.compile(
    r"(?<![\w#+.])(?P<product>" + _alternation(s for v in PRODUCTS.values() for s in v) + r")"
    r"(?:\s+version)?(?:\s+(?:is|at|of))?[\s\-]*" + _VERSION + r"\b",
    re.IGNORECASE,
)
_EDITOR_RE = _vocab_pattern(EDITORS)
_OS_RE = _vocab_pattern(OPERATING_SYSTEMS)
_THEME_RE = _vocab_pattern(THEMES)
_CHANNEL_RE = _vocab_pattern(CHANNELS)
_SPOKEN_RE = _vocab_pattern(SPOKEN)
_UNITS_RE = _vocab_pattern(UNITS)
_INDENT_RE = _vocab_pattern(INDENTATION)


def subject_of(prefix: str) -> str:
    """Whom a clause is about, from the words before its value: SELF or the third party named."""
    words: list[str] = re.findall(r"[\w'\-]+", prefix.casefold())
    for word in words:
        if word in _THIRD_PARTY:
            # "my sister", "our client", "the team": the relation names the subject.
            return word
    rest = [
        w
        for w in words
        if w not in _SUBJECT_NOISE and w not in _VERB_WORDS and w not in SCOPES and not w.endswith("'s")
    ]
    if not rest:
        return SELF
    # A capitalised first word that is the speaker's own name cannot be told
    # apart from a third party's; both sides of a pair are compared the same way.
    return " ".join(rest)


def _scope_of(clause: str, exclude: Iterable[str] = ()) -> str:
    skip = {e.casefold() for e in exclude}
    for word in re.findall(r"[\w\-]+", clause.casefold()):
        if word in SCOPES and word not in skip:
            return SCOPES[word]
    if re.search(r"\bmachine learning\b", clause, re.IGNORECASE):
        return "machine learning"
    return ""


def _vocab_values(
    pattern: re.Pattern[str], vocab: Mapping[str, tuple[str, ...]], text: str
) -> list[tuple[str, int]]:
    return [(_canonical(vocab, m.group(0)), m.start()) for m in pattern.finditer(text)]


def _language_values(text: str) -> list[tuple[str, int]]:
    found = _vocab_values(_LANG_RE, LANGUAGES, text)
    found += [("go", m.start()) for m in _GO_RE.finditer(text)]
    # "Python 3.11" is a version of a product, still also a language claim.
    return sorted(found, key=lambda v: v[1])


def _split_old_new(clause: str, values: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], set[str]]:
    """Values a clause moves away from ("from Python to Rust", "instead of Python") are negated."""
    old: set[str] = set()
    m = _FROM_TO.search(clause)
    if m:
        old |= {v for v, pos in values if m.start("old") <= pos < m.end("old")}
    m = _INSTEAD.search(clause)
    if m:
        old |= {v for v, pos in values if m.start("old") <= pos < m.end("old")}
    return [(v, pos) for v, pos in values if v not in old], old


def _claims_from_values(
    attribute: str,
    clause: str,
    values: list[tuple[str, int]],
    *,
    scope: str = "",
) -> list[Claim]:
    if not values:
        return []
    current, moved_away = _split_old_new(clause, values)
    first = min(pos for _, pos in values)
    subject = subject_of(clause[:first])
    negated = bool(_NEGATION.search(clause[:first]))
    hedged = bool(_HEDGE.search(clause))
    additive = bool(_ADDITIVE.search(clause))
    out: list[Claim] = []
    if current:
        out.append(
            Claim(
                attribute,
                subject,
                frozenset(v for v, _ in current),
                scope,
                negated=negated,
                additive=additive,
                hedged=hedged,
            )
        )
    if moved_away:
        out.append(Claim(attribute, subject, frozenset(moved_away), scope, negated=True, hedged=hedged))
    return out


def _language_claims(clause: str, *, cue_free: bool = False) -> list[Claim]:
    # The cue first, as in ``_pref_claims``.
    if not (cue_free or _LANG_CUE.search(clause)):
        return []
    values = _language_values(clause)
    if not values:
        return []
    # A language named with a version is about that product's version, unless a cue also says it is used.
    names = [clause[pos : pos + len(v)] for v, pos in values]
    return _claims_from_values("programming_language", clause, values, scope=_scope_of(clause, names))


def _version_claims(clause: str) -> list[Claim]:
    out: list[Claim] = []
    for m in _PRODUCT_RE.finditer(clause):
        product = _canonical(PRODUCTS, m.group("product"))
        if product == "go" and m.group("product") not in ("Go", "golang", "Golang"):
            continue
        out.extend(
            _claims_from_values(f"version:{product}", clause[: m.end()], [(m.group("version"), m.start())])
        )
    return out


def _residence_claims(clause: str, *, future: bool) -> list[Claim]:
    if future and not re.search(r"\b(?:moved|relocated)\b", clause, re.IGNORECASE):
        return []
    out: list[Claim] = []
    for m in _RESIDENCE.finditer(clause):
        place = m.group("place").strip()
        if place.casefold() in {"the", "a", "my", "our"}:
            continue
        folded = place.casefold()
        if folded in _NOT_PLACES:
            continue  # "moved from Ruby to Elixir" is about a language, not a city
        attribute = "country" if folded in COUNTRIES else "city"
        # "born in", "grew up in", "visited" are not where someone lives now.
        if re.search(
            r"\b(?:born|grew up|visit|visited|visiting|trip|holiday|vacation)\b",
            clause[: m.start("place")],
            re.IGNORECASE,
        ):
            continue
        out.extend(_claims_from_values(attribute, clause, [(folded, m.start("place"))]))
    return out


def _employer_claims(clause: str, *, future: bool) -> list[Claim]:
    if future:
        return []
    out: list[Claim] = []
    for m in _EMPLOYER.finditer(clause):
        org = m.group("org").strip(" .")
        words = org.split()
        while words and words[-1].casefold() in _NOT_ORG | {"as", "since", "in", "on"}:
            words.pop()
        if not words or words[0].casefold() in _NOT_ORG:
            continue
        value = " ".join(words).casefold()
        left = m.group(0).casefold().startswith("left")
        claim = _claims_from_values("employer", clause, [(value, m.start("org"))])
        if left:
            claim = [
                Claim(c.attribute, c.subject, c.values, c.scope, negated=True, hedged=c.hedged) for c in claim
            ]
        out.extend(claim)
    return out


def _role_claims(clause: str, *, future: bool) -> list[Claim]:
    if future:
        return []
    out: list[Claim] = []
    for m in _ROLE.finditer(clause):
        role = " ".join(m.group("role").casefold().split())
        words = [
            w
            for w in role.split()
            if w not in {"now", "currently", "also", "a", "an", "the", "full-time", "part-time"}
        ]
        if not words:
            continue
        out.extend(_claims_from_values("role", clause, [(" ".join(words), m.start("role"))]))
    return out[:1]


def _region_claims(clause: str) -> list[Claim]:
    values = [(m.group(0).casefold(), m.start()) for m in _REGION.finditer(clause)]
    return _claims_from_values("region", clause, values)


def _timezone_claims(clause: str, *, cue_free: bool = False) -> list[Claim]:
    # Without a cue nothing is claimed, however strong a value: the cue first, as in ``_pref_claims``.
    if not (cue_free or _TZ_CUE.search(clause)):
        return []
    values = [(re.sub(r"\s+", "", m.group("tz")).casefold(), m.start()) for m in _TZ.finditer(clause)]
    if not values:
        return []
    return _claims_from_values("timezone", clause, values)


def _pref_claims(
    attribute: str,
    pattern: re.Pattern[str],
    vocab: Mapping[str, tuple[str, ...]],
    cue: re.Pattern[str],
    clause: str,
    *,
    cue_free: bool = False,
) -> list[Claim]:
    # The cue first: a few words against a vocabulary's every spelling, and most
    # clauses name no preference at all (the answer is the same in either order).
    if not (cue_free or cue.search(clause)):
        return []
    values = _vocab_values(pattern, vocab, clause)
    if not values:
        return []
    return _claims_from_values(attribute, clause, values)


def _clause_claims(clause: str) -> list[Claim]:
    # Whether the clause speaks of the future (a plan is not a fact), read once for the three that ask.
    future = _FUTURE.search(clause) is not None
    claims: list[Claim] = []
    claims += _version_claims(clause)
    claims += _language_claims(clause)
    claims += _residence_claims(clause, future=future)
    claims += _employer_claims(clause, future=future)
    claims += _role_claims(clause, future=future)
    claims += _region_claims(clause)
    claims += _timezone_claims(clause)
    claims += _pref_claims("editor", _EDITOR_RE, EDITORS, _PREF_CUE, clause)
    claims += _pref_claims("operating_system", _OS_RE, OPERATING_SYSTEMS, _PREF_CUE, clause)
    claims += _pref_claims("ui_theme", _THEME_RE, THEMES, _PREF_CUE, clause)
    claims += _pref_claims("contact_channel", _CHANNEL_RE, CHANNELS, _CONTACT_CUE, clause)
    claims += _pref_claims("reply_language", _SPOKEN_RE, SPOKEN, _REPLY_CUE, clause)
    claims += _pref_claims("units", _UNITS_RE, UNITS, _UNITS_CUE, clause)
    claims += _pref_claims("indentation", _INDENT_RE, INDENTATION, _INDENT_CUE, clause)
    return claims


def key_attribute(key: str | None) -> str | None:
    """The vocabulary attribute a key names (``primary_language`` -> ``programming_language``)."""
    if not key:
        return None
    words = set(re.findall(r"[a-z0-9]+", key.casefold()))
    if "version" in words:
        for product, spellings in PRODUCTS.items():
            if words & {s.replace(".", "") for s in spellings} or product in words:
                return f"version:{product}"
        return None
    for attribute, cue_words in KEY_ATTRIBUTES:
        if words & cue_words:
            return attribute
    return None


def _cue_free_claims(attribute: str, statement: str) -> list[Claim]:
    """A keyed fact's bare statement ("Rust", "eu-west-2") read as the key's attribute."""
    text = _nfkc(statement)
    if attribute == "programming_language":
        return _language_claims(text, cue_free=True)
    if attribute in ("city", "country"):
        words = text.strip(" .").split()
        if 0 < len(words) <= 4:
            return [Claim(attribute, SELF, frozenset({" ".join(words).casefold()}))]
        return []
    if attribute == "timezone":
        return _timezone_claims(text, cue_free=True)
    vocabularies: Mapping[str, tuple[re.Pattern[str], Mapping[str, tuple[str, ...]]]] = {
        "editor": (_EDITOR_RE, EDITORS),
        "operating_system": (_OS_RE, OPERATING_SYSTEMS),
        "ui_theme": (_THEME_RE, THEMES),
        "contact_channel": (_CHANNEL_RE, CHANNELS),
    }
    if attribute in vocabularies:
        pattern, vocab = vocabularies[attribute]
        return _claims_from_values(attribute, text, _vocab_values(pattern, vocab, text))
    return []


@functools.lru_cache(maxsize=65_536)
def claims_of(statement: str, key: str | None = None) -> tuple[Claim, ...]:
    """Every claim a statement makes; a key names the attribute a bare statement answers.

    Cached: retrieval reads the same facts' claims round after round, and the
    answer (immutable claims) depends on the text and key alone."""
    found: list[Claim] = []
    for clause in clauses(statement):
        found.extend(_clause_claims(clause))
    attribute = key_attribute(key)
    if attribute and not any(c.attribute == attribute for c in found):
        found.extend(_cue_free_claims(attribute, statement))
    return tuple(found)


def infer_key(statement: str) -> str | None:
    """The attribute a statement answers about its own subject, if the vocabulary knows it."""
    for claim in claims_of(statement):
        if claim.subject == SELF and not claim.negated:
            return claim.attribute
    return None


# --- stored claims ----------------------------------------------------------
#
# Reading a statement's claims costs ~80 µs (fourteen readings per clause), and
# a first round compares every eligible candidate's: a process that has not
# seen a principal before (a restart, or one of many web processes) read them
# all, thousands for the largest principals. So a fact's claims are read once,
# when its statement is stored, and kept on its row (``Fact.claims``) in the
# text ``stored_claims`` makes. That text begins with a check of what it was
# read from: the reader's version, the key and the statement. Stored claims
# whose check does not match (a statement changed by a path that did not store
# them again, or a reader that changed since) are ignored and the statement is
# read afresh, so storing them can make a retrieval faster, never different.

# Raise it with any change to what ``claims_of`` returns for some statement:
# every stored value is then ignored until ``manage.py store_fact_claims``
# stores it again. tests/governance/rules/test_contradictions.py pins the
# claims of a corpus to this number.
CLAIMS_VERSION = 1
_CHECK_CHARS = 16  # a 64-bit check, in hex: a changed statement never passes by chance


def _claims_check(statement: str, key: str | None) -> str:
    # None and "" are one key to claims_of (key_attribute reads neither).
    read_from = f"{CLAIMS_VERSION}\0{key or ''}\0{statement}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(read_from, digest_size=_CHECK_CHARS // 2).hexdigest()


def stored_claims(statement: str, key: str | None) -> str:
    """``claims_of(statement, key)`` as a fact's row keeps them: the check, then the claims as JSON."""
    claims = [
        [c.attribute, c.subject, sorted(c.values), c.scope, c.negated | c.additive << 1 | c.hedged << 2]
        for c in claims_of(statement, key)
    ]
    return _claims_check(statement, key) + json.dumps(claims, ensure_ascii=False, separators=(",", ":"))


def holds_claims_of(stored: str | None, statement: str, key: str | None) -> bool:
    """Whether ``stored`` was made by ``stored_claims`` from this statement and key, by this reader."""
    return stored is not None and stored[:_CHECK_CHARS] == _claims_check(statement, key)


def claims_from_store(stored: str | None, statement: str, key: str | None) -> tuple[Claim, ...]:
    """``claims_of(statement, key)``, taken from ``stored`` when that was made from them by this reader."""
    if stored is None:
        return claims_of(statement, key)
    return _trusted_claims(stored, statement, key)


@functools.lru_cache(maxsize=65_536)
def _trusted_claims(stored: str, statement: str, key: str | None) -> tuple[Claim, ...]:
    """Cached like ``claims_of``: the same rows come back round after round."""
    if not holds_claims_of(stored, statement, key):
        return claims_of(statement, key)
    claims = stored[_CHECK_CHARS:]
    if claims == "[]":
        return ()  # most statements claim nothing the vocabulary knows: no JSON to read
    return tuple(
        Claim(attribute, subject, frozenset(values), scope, bool(flags & 1), bool(flags & 2), bool(flags & 4))
        for attribute, subject, values, scope, flags in json.loads(claims)
    )


# --- conflict -------------------------------------------------------------


def _compatible(attribute: str, a: str, b: str) -> bool:
    if a == b:
        return True
    if attribute.startswith("version:"):
        # "15" and "15.4" name the same major version: not a different value.
        pa, pb = a.split("."), b.split(".")
        n = min(len(pa), len(pb))
        return pa[:n] == pb[:n]
    return False


def _overlap(attribute: str, a: frozenset[str], b: frozenset[str]) -> bool:
    return any(_compatible(attribute, x, y) for x in a for y in b)


def claims_conflict(new: Claim, old: Claim) -> bool:
    """Whether two claims cannot both hold now (see the module note)."""
    if new.attribute != old.attribute or new.subject != old.subject:
        return False
    if new.scope and old.scope and new.scope != old.scope:
        return False
    if new.additive or old.additive:
        return False
    if new.negated and old.negated:
        return False
    if new.negated != old.negated:
        return _overlap(new.attribute, new.values, old.values)
    return not _overlap(new.attribute, new.values, old.values)


def contradiction(
    new_statement: str,
    old_statement: str,
    *,
    new_key: str | None = None,
    old_key: str | None = None,
    new_claims: Sequence[Claim] | None = None,
    old_claims: Sequence[Claim] | None = None,
) -> Contradiction | None:
    """The first attribute on which ``new_statement`` contradicts ``old_statement``, or None.

    Statements that agree on some value of the attribute (one repeats a value
    the other gives) are not a contradiction even if they also differ: "I use
    Python and Go" does not contradict "I use Go".
    """
    new = claims_of(new_statement, new_key) if new_claims is None else new_claims
    old = claims_of(old_statement, old_key) if old_claims is None else old_claims
    for a in new:
        agreeing = [
            b
            for b in old
            if b.attribute == a.attribute
            and b.subject == a.subject
            and a.negated == b.negated
            and _overlap(a.attribute, a.values, b.values)
        ]
        if agreeing and not a.negated:
            continue
        for b in old:
            if claims_conflict(a, b):
                return Contradiction(
                    attribute=a.attribute,
                    new_values=a.values,
                    old_values=b.values,
                    certain=not (a.hedged or b.hedged),
                )
    return None


# --- retrieval: only the newer side of an active pair is injected ----------

DIRECT_SOURCES = frozenset({"user_statement", "config", "reviewer"})
_NOT_COMPARED_KINDS = frozenset({"slot", "summary"})


class Comparable(Protocol):
    """What ``conflict_losers`` reads of an active fact.

    Retrieval's ``Candidate`` has it as it is: a first round passes its
    eligible candidates themselves rather than a copy of each (thousands for
    a large principal, issue 13).
    """

    @property
    def fact_id(self) -> int: ...
    @property
    def statement(self) -> str: ...
    @property
    def key(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def is_project_fact(self) -> bool: ...
    @property
    def source_type(self) -> str: ...
    @property
    def when(self) -> datetime: ...  # the fact's last verification
    @property
    def stored_claims(self) -> str | None: ...  # the fact row's (``stored_claims``), when read with it


def is_newer(a: Comparable, b: Comparable) -> bool:
    """Whether ``a`` is the newer of the two: by last verification, then by id."""
    return (a.when, a.fact_id) > (b.when, b.fact_id)


@dataclass(frozen=True)
class PairRulings:
    """What reviewers said about particular pairs of facts (pairs as frozensets of two fact ids).

    ``kept``: a reviewer kept both (not a conflict), so neither loses to the
    other whatever their wording. ``waiting``: a possible conflict waiting for
    a reviewer (found by the background similarity check, or an uncertain
    reading), so the older one loses until then, like a contradiction.
    """

    kept: frozenset[frozenset[int]] = frozenset()
    waiting: frozenset[frozenset[int]] = frozenset()


NO_RULINGS = PairRulings()


def rulings_from(pairs: Iterable[tuple[int, int, bool]]) -> PairRulings:
    """Rulings from (fact id, conflicting fact id, still waiting for a reviewer) of each review.

    A pair a reviewer kept both of once is kept, even if another review of it waits.
    """
    kept: set[frozenset[int]] = set()
    waiting: set[frozenset[int]] = set()
    for fact_id, other_id, pending in pairs:
        (waiting if pending else kept).add(frozenset((fact_id, other_id)))
    return PairRulings(kept=frozenset(kept), waiting=frozenset(waiting - kept))


# How a conflict review's source reference begins: the system opened it (services/conflicts.py).
CONFLICT_REVIEW_PREFIX = "conflict-check:"


def is_conflict_review(source_ref: str, conflicts_with_id: int | None) -> bool:
    """A review item the system opened for a possible conflict (not an agent's proposal)."""
    return source_ref.startswith(CONFLICT_REVIEW_PREFIX) and conflicts_with_id is not None


def _winner(newer: Comparable, older: Comparable) -> tuple[Comparable, Comparable]:
    """(winner, loser) of a contradicting pair: the newer one, unless R18 or hearsay says otherwise."""
    if bool(newer.key) != bool(older.key):
        return (newer, older) if newer.key else (older, newer)
    if newer.source_type not in DIRECT_SOURCES and older.source_type in DIRECT_SOURCES:
        return older, newer
    return newer, older


def conflict_losers(statements: Sequence[Comparable], rulings: PairRulings = NO_RULINGS) -> dict[int, int]:
    """Facts that lose to a contradicting one: ``{loser_id: winner_id}``.

    Of two active facts that contradict each other, the newer one wins, unless
    it is indirect evidence (a web page, a model's inference) and the older one
    is direct evidence: hearsay never silences what the person or the
    configuration said (R6). A keyed fact always beats an unkeyed one (R18).
    A pair a reviewer kept both of never conflicts; a pair waiting for a
    reviewer conflicts even when the wording alone would not tell. A loser
    that several facts beat is mapped to the first of them in ``statements``.
    """
    claims = {
        s.fact_id: claims_from_store(s.stored_claims, s.statement, s.key)
        for s in statements
        if s.kind not in _NOT_COMPARED_KINDS
    }
    compared = [s for s in statements if claims.get(s.fact_id)]
    losers = _contradiction_losers(compared, [claims[s.fact_id] for s in compared], rulings.kept)
    if rulings.waiting:
        by_id = {s.fact_id: s for s in statements}
        for pair in sorted(rulings.waiting - rulings.kept, key=sorted):
            first, second = (by_id.get(fact_id) for fact_id in sorted(pair))
            if first is None or second is None:
                continue  # one side is not a candidate (not active, or not this principal's)
            newer, older = (first, second) if is_newer(first, second) else (second, first)
            winner, loser = _winner(newer, older)
            losers.setdefault(loser.fact_id, winner.fact_id)
    return losers


def _contradiction_losers(
    compared: Sequence[Comparable], claims: Sequence[tuple[Claim, ...]], kept: frozenset[frozenset[int]]
) -> dict[int, int]:
    """``conflict_losers`` for the pairs the wording contradicts, without comparing fact with fact.

    Whether two facts contradict depends on their claims alone, and a large
    principal's facts repeat a few claims many times ("prefers dark mode" in
    hundreds of notes). So the facts are grouped by their claims, each pair of
    groups that share a topic is compared once, and each fact then asks each
    contradicting group for its first member (in ``compared``) that beats it
    (``_Rivals``): linear in the facts, quadratic only in the number of
    different claims about one topic (issue 13; it compared ~2,500 pairs of
    facts per round for the largest bench principal, and would compare
    millions for one with thousands of facts about one attribute).
    The pairs, winners and order of the answer are those of comparing every
    two facts that share a topic, in order (tests/governance/rules pin it).
    """
    groups: dict[tuple[Claim, ...], int] = {}
    group_of = [groups.setdefault(c, len(groups)) for c in claims]
    # Only claims about the same attribute of the same subject can conflict
    # (claims_conflict): groups are compared within a topic.
    by_topic: dict[tuple[str, str], list[int]] = {}
    for group, group_claims in enumerate(groups):
        for topic in {(c.attribute, c.subject) for c in group_claims}:
            by_topic.setdefault(topic, []).append(group)
    rivals: list[set[int]] = [set() for _ in groups]
    compared_groups: set[tuple[int, int]] = set()
    listed = list(groups)
    for members in by_topic.values():
        for n, a in enumerate(members):
            for b in members[n:]:  # a group with itself too: two facts with the same claims
                if (a, b) in compared_groups:
                    continue
                compared_groups.add((a, b))
                # Given claims, ``contradiction`` reads no statement text: the
                # groups' claims decide for every fact in them.
                if (
                    contradiction("", "", new_claims=listed[a], old_claims=listed[b]) is not None
                    or contradiction("", "", new_claims=listed[b], old_claims=listed[a]) is not None
                ):
                    rivals[a].add(b)
                    rivals[b].add(a)
    # Ties on (time, id) only arise for a fact listed twice; the later one then counts as newer.
    order = [(s.when, s.fact_id, i) for i, s in enumerate(compared)]
    sides: dict[tuple[int, bool, bool, bool], _Rivals] = {}
    for i, s in enumerate(compared):
        side = (group_of[i], s.is_project_fact, bool(s.key), s.source_type in DIRECT_SOURCES)
        sides.setdefault(side, _Rivals()).members.append(i)
    for side_facts in sides.values():
        side_facts.index(order)
    reviewed = {fact_id for pair in kept for fact_id in pair}
    found: list[tuple[int, int]] = []  # (loser, winner) positions in ``compared``
    for i, s in enumerate(compared):
        keyed, direct = bool(s.key), s.source_type in DIRECT_SOURCES
        first: int | None = None
        for group in rivals[group_of[i]]:
            for rival_keyed in (True, False):
                for rival_direct in (True, False):
                    rival = sides.get((group, s.is_project_fact, rival_keyed, rival_direct))
                    if rival is None:
                        continue
                    beats = _beats(rival_keyed, rival_direct, keyed, direct)
                    if beats is None:
                        continue
                    if s.fact_id in reviewed:
                        # A pair a reviewer kept both of is skipped: walk this side's facts.
                        j = rival.first_beating(i, order, beats, compared, kept)
                    else:
                        j = rival.first(order[i] if beats == "newer" else None)
                    if j is not None and (first is None or j < first):
                        first = j
        if first is not None:
            found.append((i, first))
    # In the order comparing the pairs (lower position first) would have met them.
    found.sort(key=lambda pair: (min(pair), max(pair)))
    return {compared[loser].fact_id: compared[winner].fact_id for loser, winner in found}


def _beats(keyed: bool, direct: bool, other_keyed: bool, other_direct: bool) -> str | None:
    """Which facts of one kind (keyed?, direct?) beat a contradicting fact of another: ``_winner`` by kind.

    "all", "newer" (those newer than it), or None.
    """
    if keyed != other_keyed:
        return "all" if keyed else None
    if direct == other_direct:
        return "newer"
    # Hearsay never beats direct evidence, and direct evidence always beats hearsay.
    return "all" if direct else None


class _Rivals:
    """The facts of one claims group with one projectness, keyedness and directness, by recency."""

    def __init__(self) -> None:
        self.members: list[int] = []  # positions in ``compared``, ascending
        self._by_age: list[tuple[datetime, int, int]] = []
        self._first_from: list[int] = []  # the lowest position among _by_age[k:]

    def index(self, order: Sequence[tuple[datetime, int, int]]) -> None:
        self._by_age = sorted(order[i] for i in self.members)
        lowest = len(order)
        self._first_from = [0] * len(self._by_age)
        for k in range(len(self._by_age) - 1, -1, -1):
            lowest = min(lowest, self._by_age[k][2])
            self._first_from[k] = lowest

    def first(self, newer_than: tuple[datetime, int, int] | None) -> int | None:
        """The lowest position of a member (newer than ``newer_than``, when given)."""
        if newer_than is None:
            return self.members[0]
        k = bisect.bisect_right(self._by_age, newer_than)
        return self._first_from[k] if k < len(self._by_age) else None

    def first_beating(
        self,
        i: int,
        order: Sequence[tuple[datetime, int, int]],
        beats: str,
        compared: Sequence[Comparable],
        kept: frozenset[frozenset[int]],
    ) -> int | None:
        for j in self.members:
            if beats == "newer" and order[j] <= order[i]:
                continue
            if frozenset((compared[i].fact_id, compared[j].fact_id)) not in kept:
                return j
        return None


# --- possible conflicts by similarity (the background check) ---------------
#
# The vocabulary above knows common attributes; people also state one-off
# ones ("my locker number is 41", "our wifi network is called Falcon"). Two
# statements about the same principal that read almost alike (cosine
# similarity of their embeddings at least CONFLICT_MIN_SIMILARITY) but carry
# different identifying values of the same kind (a number, a name, an e-mail
# address...; rules/identifiers.py) and share none may give one attribute two
# values. That is never certain, so it only ever puts the pair in front of a
# reviewer. Where the vocabulary has an opinion on the pair (both make claims
# about one attribute of one subject) it is left to the wording rules above.
# The threshold comes from the labelled set (docs/relevance.md, "Possible
# conflicts by similarity"): no near-miss there reaches it.

CONFLICT_MIN_SIMILARITY = 0.65
# Episodic facts are events: two meetings with two people are both true.
SIMILARITY_KINDS = frozenset({"profile", "preference", "project_fact", "tool_instruction"})
# A statement about one occasion ("I visited Paris last week") or a plan ("thinking
# about moving to Berlin") gives no current value, so it cannot contradict one: the
# similarity check leaves such pairs alone (the contradiction scenarios' near-misses).
_OCCASION = re.compile(
    r"\b(?:visit(?:ed|ing)|went to|been to|travel(?:l)?ed to|trip to|flew to|"
    r"last (?:week|month|year|night|weekend)|yesterday|this (?:morning|week)|on (?:holiday|vacation))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SimilarConflict:
    kinds: tuple[str, ...]  # the kinds of value that differ (identifiers.KIND_LABELS)
    similarity: float

    def detail(self) -> str:
        return (
            f"Reads almost like an older fact ({round(self.similarity * 100)}% similar) "
            f"but gives a different {identifiers.describe(self.kinds)}."
        )


def similar_conflict(
    new_statement: str,
    old_statement: str,
    similarity: float,
    *,
    new_key: str | None = None,
    old_key: str | None = None,
    threshold: float = CONFLICT_MIN_SIMILARITY,
) -> SimilarConflict | None:
    """Whether two similar statements may give one attribute two values (see the note above)."""
    if similarity < threshold:
        return None
    if any(_OCCASION.search(text) or _FUTURE.search(text) for text in (new_statement, old_statement)):
        return None  # an occasion or a plan, not a standing value
    new_claims, old_claims = claims_of(new_statement, new_key), claims_of(old_statement, old_key)
    topics = {(c.attribute, c.subject) for c in new_claims}
    if any((c.attribute, c.subject) in topics for c in old_claims):
        return None  # the wording rules decide this pair
    new_values, old_values = (
        identifiers.identifying_values(new_statement),
        identifiers.identifying_values(old_statement),
    )
    if set(new_values) & set(old_values):
        return None  # they agree on some value: more likely two facts about one thing
    differing = sorted(set(new_values.values()) & set(old_values.values()))
    if not differing:
        return None
    return SimilarConflict(kinds=tuple(differing), similarity=similarity)
