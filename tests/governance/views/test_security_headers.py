"""Content-Security-Policy with nonces and htmx locked down (issue 12 item 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

TEMPLATES = Path(settings.BASE_DIR) / "templates"
SCRIPT_TAG = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.S | re.I)


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives: dict[str, list[str]] = {}
    for part in header.split(";"):
        name, *values = part.split()
        directives[name] = values
    return directives


def nonce_of(directives: dict[str, list[str]], directive: str) -> str:
    nonces = [v for v in directives[directive] if v.startswith("'nonce-")]
    assert len(nonces) == 1, directives[directive]
    return nonces[0].removeprefix("'nonce-").removesuffix("'")


def assert_strict(directives: dict[str, list[str]]) -> None:
    flat = " ".join(v for values in directives.values() for v in values)
    assert "'unsafe-inline'" not in flat and "'unsafe-eval'" not in flat
    assert directives["default-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["script-src"][0] == "'self'"


def test_a_console_page_carries_a_strict_policy_whose_nonce_its_scripts_carry(client, reviewer):
    client.force_login(reviewer)
    response = client.get("/")
    assert response.status_code == 200
    directives = policy(response)
    assert_strict(directives)
    assert directives["style-src"] == ["'self'"]
    nonce = nonce_of(directives, "script-src")
    scripts = SCRIPT_TAG.findall(response.content.decode())
    assert len(scripts) >= 2  # htmx and the console's own
    for attributes, body in scripts:
        assert f'nonce="{nonce}"' in attributes and "src=" in attributes and not body.strip()


def test_each_response_gets_a_fresh_nonce_and_the_login_page_is_covered(client):
    first, second = client.get("/login/"), client.get("/login/")
    assert_strict(policy(first))
    assert nonce_of(policy(first), "script-src") != nonce_of(policy(second), "script-src")


def test_htmx_runs_without_eval_only_against_this_site_and_injects_no_styles(client, reviewer):
    client.force_login(reviewer)
    html = client.get("/").content.decode()
    match = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html)
    assert match, "no htmx-config meta tag"
    config = json.loads(match.group(1))
    assert config["allowEval"] is False
    assert config["selfRequestsOnly"] is True
    assert config["includeIndicatorStyles"] is False
    # The history settings that keep personal data out of the browser stay.
    assert config["historyCacheSize"] == 0


def test_no_template_has_inline_script_handlers_or_inline_styles():
    problems = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        # Template comments are never sent to the browser.
        text = re.sub(r"\{#.*?#\}", "", path.read_text())
        name = path.relative_to(TEMPLATES)
        for attributes, body in SCRIPT_TAG.findall(text):
            if "nonce=" not in attributes:
                problems.append(f"{name}: <script> without a nonce")
            if body.strip() and "src=" in attributes:
                problems.append(f"{name}: <script src> with a body")
        for handler in re.findall(r"\s(on[a-z]+)\s*=", text, re.I):
            problems.append(f"{name}: inline {handler}= handler")
        if re.search(r"\sstyle\s*=", text, re.I):
            problems.append(f"{name}: style= attribute")
        for attributes in re.findall(r"<style\b([^>]*)>", text, re.I):
            if "nonce=" not in attributes:
                problems.append(f"{name}: <style> without a nonce")
        if re.search(r"javascript:", text, re.I):
            problems.append(f"{name}: javascript: URL")
    assert problems == []


def test_the_api_docs_render_under_their_own_slightly_wider_policy(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    directives = policy(response)
    assert_strict(directives)
    style_nonce = nonce_of(directives, "style-src")
    assert directives["img-src"] == ["'self'", "data:"]
    html = response.content.decode()
    assert f'<style nonce="{style_nonce}">' in html
    scripts = SCRIPT_TAG.findall(html)
    assert len(scripts) == 3 and all("src=" in a and not b.strip() for a, b in scripts)
    script_url = re.findall(r'src="([^"]+)"', scripts[-1][0])[0].replace("&amp;", "&")
    initialiser = client.get(script_url)
    assert initialiser.status_code == 200 and b"SwaggerUIBundle" in initialiser.content
    # Only that view is relaxed.
    assert policy(client.get("/login/"))["img-src"] == ["'self'"]
