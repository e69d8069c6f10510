"""Every relative link of the README, docs/ and research/ points at a file the repository has, and
its ``#anchor`` part at a heading that file has; so do the ``docs/<path>.md`` and ``research/<path>.md``
references in the code's docstrings, comments and configs, and every repository path of research/,
benchmarks/ or configs/ that a page, a comment or a docstring names.

CI runs on a fresh clone, so a figure that ``.gitignore`` keeps out of git (as the study's
``curves.png`` once were) is a missing file here. Anchors are GitHub's: the heading's text
lower-cased, punctuation dropped, spaces as hyphens, ``-1``, ``-2``, ... on repeats.
"""

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "research").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
#: ``docs/<path>.md`` or ``research/<path>.md#anchor`` in code, configs and setup files
CODE_REFERENCE = re.compile(r"\b(?:docs|research)/\w[\w./-]*\.md(?:#[^\s)`'\",;]+)?")
#: a path in research/, benchmarks/ or configs/ named in any text (not a pattern: no ``*``, ``<...>``, ``{...}``)
#: (the lookahead-and-backreference makes the path's characters atomic: no backing off a ``*`` to a shorter path)
PATH_MENTION = re.compile(r"(?<![\w./-])((?:research|benchmarks|configs)/(?=([\w./-]*))\2)(?![*<{])")
#: paths named as they were when something ran, which the repository no longer has (records, not references)
RECORDS = {
    "research/archives/mujoco_halfcheetah_recipe_check/comparison.csv",  # the --out of an archived compare
    "research/sweeps/mujoco_stein.yaml",  # the first MuJoCo spec's name, quoted by its successor's header
    "benchmarks/results/runs", "benchmarks/results/runs/paper/CartpoleSwingUp",  # round 1's runs, not kept
    "configs/presets/NAME.yaml", "configs/sweeps/x.yaml",  # placeholders in usage.md and sweeps.md
    # a stopped part's half, removed once research/scripts/frozen_parts.sh joined it with its rest
    "research/archives/partial/repulsion_confirm_mountaincar",
    "research/archives/partial/repulsion_confirm_mountaincar/comparison.csv",
    "research/archives/partial/repulsion_confirm_weights_dense",
    "research/archives/partial/repulsion_confirm_weights_dense/comparison.csv",
}
CODE_FILES = [p for pattern in ("steinrl/**/*.py", "benchmarks/**/*.py", "envs/**/*.py", "tests/**/*.py",
                                "configs/**/*.yaml", "research/scripts/*.py", "research/sweeps/*.yaml", "*.py",
                                "setup.cfg", "pyproject.toml", "benchmarks/*.sh", ".ci/run")
              for p in sorted(ROOT.glob(pattern))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors of ``page``'s headings (not of lines in fenced code)."""
    repeats: dict[str, int] = {}
    found = set()
    fence = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        m = None if fence else HEADING.match(line)
        if m:
            base = slug(m.group(1))
            n = repeats.get(base, 0)
            repeats[base] = n + 1
            found.add(f"{base}-{n}" if n else base)
    return frozenset(found)


def _links(page: Path) -> list[tuple[str, str]]:
    """``(target, anchor)`` of every relative link of ``page`` (target "" for a same-page anchor)."""
    out = []
    for m in LINK.finditer(page.read_text()):
        target, _, anchor = m.group(1).partition("#")
        if "://" not in target and not target.startswith("mailto:"):
            out.append((target, anchor))
    return out


def _relative_links(page: Path) -> list[str]:
    return [t for t, _ in _links(page) if t]


def _broken(source: Path, target: Path, anchor: str) -> str | None:
    if not target.exists():
        return "missing file"
    if anchor and target.suffix == ".md" and target.is_file() and anchor not in anchors(target):
        return f"no heading #{anchor}"
    if anchor and target.is_dir() and anchor not in anchors(target / "README.md"):
        return f"no heading #{anchor} in its README.md"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = [t for t in _relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_anchors_name_headings(page):
    bad = []
    for target, anchor in _links(page):
        why = _broken(page, page.parent / target if target else page, anchor)
        if why:
            bad.append(f"{target}{'#' + anchor if anchor else ''}: {why}")
    assert not bad, f"{page.relative_to(ROOT)} has broken links: {bad}"


def test_code_references_to_docs_resolve():
    bad = []
    for path in CODE_FILES:
        for m in CODE_REFERENCE.finditer(path.read_text()):
            target, _, anchor = m.group(0).partition("#")
            why = _broken(path, ROOT / target, anchor.rstrip("."))
            if why:
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}: {why}")
    assert not bad, "\n".join(bad)


def test_paths_named_in_pages_code_and_configs_exist():
    """A moved script, spec, archive or results page leaves no stale mention behind (``research/...``,
    ``benchmarks/...``, ``configs/...`` in backticks, prose, comments or docstrings)."""
    bad = []
    for path in [*PAGES, *CODE_FILES]:
        for m in PATH_MENTION.finditer(path.read_text()):
            named = m.group(1).rstrip(".-")
            if named not in RECORDS and not (ROOT / named).exists():
                bad.append(f"{path.relative_to(ROOT)}: {named}")
    assert not bad, "\n".join(bad)


def test_the_path_pattern_skips_patterns_and_finds_paths():
    found = [m.group(1) for m in PATH_MENTION.finditer(
        "`research/sweeps/mujoco_*` research/archives/<dir>/ configs/{a,b}.yaml (benchmarks/uci.py). configs/presets/")]
    assert [f.rstrip(".") for f in found] == ["benchmarks/uci.py", "configs/presets/"]


def test_the_link_pattern_finds_figures_and_pages():
    page = ROOT / "README.md"
    links = _relative_links(page)
    assert any(t.endswith(".png") for t in links) and any(t.endswith(".md") for t in links)


def test_the_anchor_rule_is_githubs():
    assert slug("Temperature α") == "temperature-α"
    assert slug("RL: the 10-seed study — is S²VGD better?") == "rl-the-10-seed-study--is-s²vgd-better"
    assert slug("Exact swing-up (`CartpoleSwingUp`), 10 seeds") == "exact-swing-up-cartpoleswingup-10-seeds"
    assert slug("SB3's A2C / PPO with a structured network") == "sb3s-a2c--ppo-with-a-structured-network"


def test_the_anchor_check_catches_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Part\n\n```\n# not a heading\n```\n\n## Part\n")
    assert anchors(page) == {"title", "part", "part-1"}
    assert _broken(page, page, "part-1") is None
    assert _broken(page, page, "not-a-heading") == "no heading #not-a-heading"
    assert _broken(page, tmp_path / "absent.md", "") == "missing file"
