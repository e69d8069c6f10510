#!/usr/bin/env python
"""Re-make every figure in docs/ and research/ from the data archived beside it, with the one plotting
code (:func:`steinrl.run.plotting.draw_panels`); nothing is trained.

    python benchmarks/docs_figures.py            # re-make them all, a line per figure
    python benchmarks/docs_figures.py --list     # each figure and its source, nothing drawn

Each figure's source (:data:`FIGURES`):

- ``research/archives/<dir>/curves.png``: the sweep archive beside it, ``results.csv.gz``
  (``benchmarks/combine_sweeps.py --archive`` wrote it; its x is the iteration, or the column
  it kept, e.g. ``time/total_seconds`` for a ``--x`` archive, drawn as archived);
- ``research/results/bandits_<env>_<protocol>.png``: ``benchmarks/bandits.py``'s archive beside it,
  ``bandits_<env>_<protocol>.csv.gz``;
- ``research/results/cartpole.png``, ``swingup.png``, ``double_pendulum.png`` and
  ``inverted_double_pendulum.png``: the seed-mean curves in ``research/archives/round1_learning/learning.json``
  (round 1's learning benchmark; the per-seed curves were not kept, so these have no band).

A figure whose source is not in the repository is named and left as it is. Last line:
``docs_figures made=<n> kept=<k>``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.run.plotting import Curve, Panel, draw_panels  # noqa: E402
from steinrl.run.sweep_report import plot_curves, read_results_csv  # noqa: E402

#: the folders whose figures this script accounts for
FOLDERS = (ROOT / "docs", ROOT / "research")
ARCHIVES, RESULTS = ROOT / "research" / "archives", ROOT / "research" / "results"
LEARNING = ARCHIVES / "round1_learning" / "learning.json"
#: Figures drawn from learning.json: figure -> (result set, task, key drawn).
LEARNING_FIGURES = {
    "cartpole.png": ("paper", "Cartpole", "curve", "rollout/ep_rew_max_particle"),
    "swingup.png": ("paper", "CartpoleSwingUp", "curve", "rollout/ep_rew_max_particle"),
    "double_pendulum.png": ("paper", "DoublePendulum", "curve", "rollout/ep_rew_max_particle"),
    "inverted_double_pendulum.png": ("mujoco", "InvertedDoublePendulum-v5", "mean_curve", "rollout/ep_rew_mean"),
}
#: Figures whose data the repository does not hold: figure -> why.
NOT_ARCHIVED = {
    "bandits_Mushroom_s2vgd.png": "made before benchmarks/bandits.py archived its curves (.csv.gz); its command "
                                  "(bandits_Mushroom_s2vgd.md) run again on 2026-11-27 gave other numbers (the code "
                                  "has changed: s2vgd-ts regret 1358 ± 202 against the table's 1445 ± 242), so the "
                                  "figure stays as its table's",
    "study_swingup_3seeds.png": "the 3-seed study's sweep output was not archived (research/archives/ began "
                                "later); only svgd-a2c's exact swing-up seeds 0-2 survive, in "
                                "research/archives/exact_10seeds",
}


def study_figure(directory: Path) -> object:
    """``curves.png`` of a sweep archive, against its kept x column if it has one (as archived: no re-binning)."""
    return plot_curves(read_results_csv(directory / "results.csv.gz"), directory / "curves.png")


def bandit_figure(figure: Path) -> object:
    """A bandit benchmark figure from its archive (``benchmarks/bandits.py --from``'s drawing)."""
    spec = importlib.util.spec_from_file_location("bandits_benchmark", ROOT / "benchmarks" / "bandits.py")
    bandits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bandits)
    header, results = bandits.read_archive(figure.with_suffix(".csv.gz"))
    specs = list(dict.fromkeys(s for _, s in results))
    deltas = list(dict.fromkeys(d for d, _ in results))
    return bandits.plot_curves(figure, header, specs, deltas, results)


def learning_figure(figure: Path, source: Path = LEARNING) -> object:
    """Round 1's seed-mean curves of one task, one line per algorithm, no band (no per-seed curves kept)."""
    tag, task, field, key = LEARNING_FIGURES[figure.name]
    runs = json.loads(source.read_text())[tag][task]
    curves = [Curve(f"{algo} (n={len(r['seeds'])})", list(range(len(r[field]))), r[field])
              for algo, r in runs.items() if r.get(field)]
    return draw_panels([Panel(task, "iteration", key, curves)], figure,
                       band="seed mean (per-seed curves not kept: no band)")


def figures() -> dict[Path, tuple[str, object]]:
    """Every figure in docs/ and research/ -> (its source, a function that re-makes it, or None)."""
    found: dict[Path, tuple[str, object]] = {}
    for png in sorted(p for folder in FOLDERS for p in folder.rglob("*.png")):
        name = png.name
        if png.parent.parent == ARCHIVES and name == "curves.png" and (png.parent / "results.csv.gz").is_file():
            found[png] = (str((png.parent / "results.csv.gz").relative_to(ROOT)), lambda p=png: study_figure(p.parent))
        elif name.startswith("bandits_") and png.with_suffix(".csv.gz").is_file():
            found[png] = (str(png.with_suffix(".csv.gz").relative_to(ROOT)), lambda p=png: bandit_figure(p))
        elif png.parent == RESULTS and name in LEARNING_FIGURES:
            found[png] = (f"{LEARNING.relative_to(ROOT)} ({'/'.join(LEARNING_FIGURES[name][:3])})",
                          lambda p=png: learning_figure(p))
        else:
            why = NOT_ARCHIVED.get(name, "no archived data found beside it")
            found[png] = (f"not archived: {why}", None)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list each figure and its source; draw nothing")
    args = p.parse_args(argv)
    made = kept = 0
    for png, (source, remake) in figures().items():
        where = png.relative_to(ROOT)
        if remake is None or args.list:
            kept += remake is None
            print(f"{where}: {'kept as it is; ' if remake is None else ''}{source}")
            continue
        drawn = remake()
        made += 1
        print(f"{where}: {drawn.size[0]}x{drawn.size[1]} px, {drawn.rows}x{drawn.columns} panels, from {source}",
              flush=True)
    print(f"docs_figures made={made} kept={kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
