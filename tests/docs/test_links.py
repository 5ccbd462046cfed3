"""The docs render on GitHub with working relative links, and point nowhere outside the checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "bench").rglob("README.md")])
PAGES = [p for p in PAGES if ".venv" not in p.parts and "out" not in p.parts]

# [text](target) outside code spans and fenced blocks; images too.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", page.read_text()), re.MULTILINE)
    return {_anchor(h) for h in headings}


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def test_the_pages_exist() -> None:
    names = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"architecture.md", "rules.md", "api.md", "operations.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
            continue
        if not resolved.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
            broken.append(f"{target}: no heading #{fragment} there")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_checkout(page: Path) -> None:
    text = page.read_text()
    assert "../shared" not in text and "DESIGN.md" not in text, (
        f"{page.relative_to(ROOT)} sends a newcomer outside the repository; cite docs/rules.md or docs/api.md"
    )


def test_the_link_checker_catches_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# A heading\n")
    page.write_text("[ok](other.md#a-heading) [bad](missing.md) [anchor](other.md#nope) `[code](x.md)`\n")
    assert _links(page) == ["other.md#a-heading", "missing.md", "other.md#nope"]
    assert _anchors(tmp_path / "other.md") == {"a-heading"}
