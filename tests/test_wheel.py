"""The wheel ships the product only: the package's modules and the configs a user runs (per-task
defaults, presets, SB3's, the example sweeps), and nothing of research/ (no study spec, archive,
results page or research script).

The wheel is built as ``pip wheel . --no-deps`` builds it (about 2 s), from a copy of the
working tree without its build outputs, so that a stale ``build/lib`` cannot add or hide a file.
"""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the example sweeps configs/sweeps/ keeps (docs/sweeps.md#shipped-specs); the studies' specs are in research/sweeps/
EXAMPLE_SWEEPS = {"smoke.yaml", "side_by_side_smoke.yaml", "tune_lr.yaml"}
#: what the copy leaves out: version control, environments and build outputs
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "runs", "*.egg-info", "__pycache__",
                                     ".pytest_cache", ".ruff_cache", ".hypothesis", "*.whl")


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> list[str]:
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel", reason="pip wheel --no-build-isolation needs the wheel package")
    tree = tmp_path_factory.mktemp("tree") / "steinrl"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCES)
    out = tree.parent / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                           "--no-cache-dir", "-q", "-w", str(out)], cwd=tree, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("steinrl-*.whl")
    return zipfile.ZipFile(built).namelist()


def _package_modules() -> set[str]:
    """The .py files setup.cfg installs: steinrl/, and envs/ and configs/ as steinrl.envs, steinrl.configs."""
    found = {f"steinrl/{p.relative_to(ROOT / 'steinrl')}" for p in (ROOT / "steinrl").rglob("*.py")}
    found |= {f"steinrl/envs/{p.relative_to(ROOT / 'envs')}" for p in (ROOT / "envs").glob("*.py")}
    return found | {"steinrl/configs/__init__.py"}


def test_the_wheel_holds_the_package_and_its_metadata_only(wheel_files):
    top = {name.split("/")[0] for name in wheel_files}
    assert top == {"steinrl", next(t for t in top if t.endswith(".dist-info"))}
    assert not [n for n in wheel_files if "research" in n.split("/")]
    modules = {n for n in wheel_files if n.endswith(".py")}
    assert modules == _package_modules()  # no research script, no benchmark, no test


def test_the_wheel_ships_the_configs_a_user_runs_and_no_study(wheel_files):
    configs = {n.removeprefix("steinrl/configs/") for n in wheel_files
               if n.startswith("steinrl/configs/") and n.endswith(".yaml")}
    expected = {p.relative_to(ROOT / "configs").as_posix() for folder in ("", "presets", "sb3")
                for p in (ROOT / "configs" / folder).glob("*.yaml")}
    assert configs == expected | {f"sweeps/{name}" for name in EXAMPLE_SWEEPS}
    studies = {p.name for p in (ROOT / "research" / "sweeps").glob("*.yaml")}
    assert studies and not studies & {Path(c).name for c in configs}
    data = {n for n in wheel_files if n.startswith("steinrl/") and not n.endswith((".py", ".yaml"))}
    assert data == {f"steinrl/bandits/data/{p.name}" for p in (ROOT / "steinrl" / "bandits" / "data").glob("*.csv")}


def test_configs_sweeps_holds_only_the_example_sweeps():
    assert {p.name for p in (ROOT / "configs" / "sweeps").glob("*")} == EXAMPLE_SWEEPS
