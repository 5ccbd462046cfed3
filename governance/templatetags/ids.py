"""Labelled identifiers, as text and as links: "F-240" for a fact, "W-241" for a write.

``{{ fact.pk|fact_ref }}`` prints the label; ``{{ fact.pk|fact_link }}`` the
label as a link to the fact's page. A write has no page of its own: its link
is the search for it, which shows the write with its statement, status and
the fact, session or review it led to. See governance/rules/references.py.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from governance.rules.references import fact_ref as _fact_ref
from governance.rules.references import write_ref as _write_ref

register = template.Library()


@register.filter
def fact_ref(pk: object) -> str:
    return _fact_ref(str(pk)) if pk not in (None, "") else ""


@register.filter
def write_ref(pk: object) -> str:
    return _write_ref(str(pk)) if pk not in (None, "") else ""


@register.filter
def fact_link(pk: object) -> SafeString | str:
    if pk in (None, ""):
        return ""
    return format_html(
        '<a class="ref" href="{}" data-fact="{}">{}</a>', reverse("facts:detail", args=[pk]), pk, fact_ref(pk)
    )


@register.filter
def write_link(pk: object) -> SafeString | str:
    if pk in (None, ""):
        return ""
    url = f"{reverse('search:results')}?{urlencode({'q': write_ref(pk)})}"
    return format_html('<a class="ref" href="{}" data-write="{}">{}</a>', url, pk, write_ref(pk))
