"""Every console page, as each demo role sees it, speaks plain language (issue 16).

A crawler follows the console's own links from the home page with the demo
data loaded and reads each page's visible text. Rule numbers ("R6") and code
names (snake_case identifiers such as ``model_inference``, "policyversion #38",
"task:governance...") belong in code, tests and docs/: people read labels.
Two places are exempt because they quote rather than speak: memory text
(``.memory-text``, what agents and people wrote) and the auditors' technical
details (``[data-technical]``), where the codes are kept on purpose.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from html.parser import HTMLParser
from io import StringIO
from urllib.parse import urldefrag, urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import Resolver404, resolve

from governance.management.commands.load_demo import DEMO_USERS

RULE_NUMBER = re.compile(r"\bR\d{1,2}\b")
CODE_NAME = re.compile(r"\b[a-z]+_[a-z_]+\b|\bpolicyversion\b|\btask:[a-z_.]+")
SKIPPED_PREFIXES = ("/admin/", "/api/", "/logout/", "/login/", "/static/")
PAGES_PER_VIEW = 4
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class VisibleText(HTMLParser):
    """Text a person sees, minus quoted memory text and the technical-details areas; and the links."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.links: list[str] = []
        self._stack: list[bool] = []  # per open element: does it hide its content from the check?

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"] or "")
        if tag in VOID:
            return
        classes = (attributes.get("class") or "").split()
        hides = (
            tag in ("script", "style", "title", "template", "textarea", "option")
            or "memory-text" in classes
            or "data-technical" in attributes
            or "hidden" in attributes
        )
        self._stack.append(hides)

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self._stack:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if not any(self._stack):
            self.text.append(data)


def _view_name(path: str) -> str | None:
    try:
        match = resolve(path)
    except Resolver404:
        return None
    return match.view_name


def crawl(client: Client) -> dict[str, list[str]]:
    """``{path: [offending words]}`` over every page reachable from home (a few per view)."""
    seen: set[str] = set()
    per_view: Counter[str] = Counter()
    queue: deque[str] = deque(["/"])
    problems: dict[str, list[str]] = {}
    while queue:
        path = queue.popleft()
        if path in seen:
            continue
        seen.add(path)
        view = _view_name(urlsplit(path).path)
        if view is None or per_view[view] >= PAGES_PER_VIEW or "export" in view:
            continue
        per_view[view] += 1
        response = client.get(path)
        assert response.status_code < 500, path
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue
        parser = VisibleText()
        parser.feed(response.content.decode())
        text = " ".join(parser.text)
        found = sorted(set(RULE_NUMBER.findall(text)) | set(CODE_NAME.findall(text)))
        if found:
            problems[path] = found
        for href in parser.links:
            href = urldefrag(href).url
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or not parts.path.startswith("/"):
                continue
            if parts.path.startswith(SKIPPED_PREFIXES):
                continue
            queue.append(href)
    assert len(seen) > 20  # the crawl really went through the console
    return problems


@pytest.mark.django_db
def test_no_rule_numbers_or_code_names_on_any_page_for_any_role() -> None:
    call_command("load_demo", stdout=StringIO())
    problems: dict[str, dict[str, list[str]]] = {}
    for username, _role in DEMO_USERS:
        client = Client()
        client.force_login(User.objects.get(username=username))
        found = crawl(client)
        if found:
            problems[username] = found
    by_word: dict[str, set[str]] = {}
    for username, pages in problems.items():
        for path, words in pages.items():
            for word in words:
                by_word.setdefault(word, set()).add(f"{username} {path}")
    report = "\n".join(f"{word}: {sorted(where)[:3]}" for word, where in sorted(by_word.items()))
    assert not problems, f"Jargon on console pages:\n{report}"
