"""The README's and docs/' relative links point at files the repository has.

CI runs on a fresh clone, so a figure that ``.gitignore`` keeps out of git (as the study's
``curves.png`` once were) is a missing file here.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    targets = (m.group(1).split("#")[0] for m in LINK.finditer(page.read_text()))
    return [t for t in targets if t and "://" not in t and not t.startswith("mailto:")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = [t for t in _relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_the_link_pattern_finds_figures_and_pages():
    page = ROOT / "README.md"
    links = _relative_links(page)
    assert any(t.endswith(".png") for t in links) and any(t.endswith(".md") for t in links)
