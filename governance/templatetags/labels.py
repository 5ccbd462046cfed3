"""Template filters that show a code as its plain-language label (governance.rules.labels).

``{{ fact.source_type|label:"source" }}`` renders the label with its definition on
hover (``<abbr title>``); ``|label_text:"source"`` renders the label alone, for
places that cannot hold markup (attributes, options).
"""

from __future__ import annotations

import re

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from governance.rules.labels import label_for

register = template.Library()
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


# How the services record a decision the rules made by themselves (``decided_by``, actors).
AUTOMATIC_RULE_PREFIX = "rule:"
AUTOMATIC_RULE = "an automatic rule"


@register.filter
def label(code: object, vocabulary: str) -> SafeString | str:
    if code is None or code == "":
        return ""
    found = label_for(vocabulary, str(code))
    if not found.definition:
        return found.text
    # format_html escapes both parts: codes can come from agent-supplied data.
    return format_html('<abbr title="{}">{}</abbr>', found.definition, found.text)


@register.filter
def label_text(code: object, vocabulary: str) -> str:
    if code is None or code == "":
        return ""
    return label_for(vocabulary, str(code)).text


@register.filter
def write_ref(pk: object) -> str:
    """Writes and facts have separate numbers; a letter keeps them apart ("Write W-241")."""
    return f"W-{pk}"


@register.filter
def fact_ref(pk: object) -> str:
    return f"F-{pk}"


@register.filter
def readable(value: object) -> str:
    """A recorded value in words: no Python literals (``None``, ``[]``, ``{'to': 30}``) on a page."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple | set):
        return ", ".join(readable(item) for item in value) if value else "none"
    if isinstance(value, dict):
        if set(value) == {"from", "to"}:
            return f"{readable(value['from'])} → {readable(value['to'])}"
        parts = [f"{label_for('field', str(k)).text}: {readable(v)}" for k, v in value.items()]
        return "; ".join(parts) if parts else "none"
    text = str(value)
    if text.startswith(AUTOMATIC_RULE_PREFIX):
        # Who decided, recorded as a rule's code ("rule:R6"): people read what it means.
        return AUTOMATIC_RULE
    if _TIMESTAMP.match(text):
        # One date format on every page: minutes, UTC, as the console's tables show them.
        return text[:16].replace("T", " ")
    return text


@register.filter
def actor(value: object) -> SafeString | str:
    """Who acted, in words: an automatic rule reads as such, not as its code."""
    text = str(value or "")
    if text.startswith(AUTOMATIC_RULE_PREFIX):
        return format_html(
            '<abbr title="{}">{}</abbr>', "Decided automatically by the memory rules", AUTOMATIC_RULE
        )
    return text
