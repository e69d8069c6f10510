#!/usr/bin/env python
"""The repulsion study's pick (research/results/repulsion_study.md), by its registered rule, from the
selection phase's archives; prints each candidate's screen and goal counts and the pick.

    python research/scripts/repulsion_pick.py

Reads ``research/archives/repulsion_selection_{sparse, hopper, swingup, entropy, floor}/``:
``comparison.csv`` (``steinrl compare``, the ``ensemble-select`` rows: the held-out pick on the
final weights) for the MuJoCo parts, ``results.csv.gz`` (each trial's ``rollout/ep_rew_max_particle``
per iteration) for the swing-up's peak. A part not archived yet is reported as missing, and the
rule is applied only when every part it needs is there. The rule:

1. a candidate passes the screen when its Hopper-v5 mean is >= 90 % of ``independent-ppo``'s and
   its swing-up mean peak is >= 310.6;
2. among those, the most SparseHalfCheetah goals (a return >= 1); ties: the higher SparseHalfCheetah
   mean return, then the higher Hopper mean;
3. none passes both: step 2 among those passing Hopper (the swing-up keeps its own setting); none
   passes Hopper: step 2 over all;
4. the entropy coefficient and the floor: the most goals; ties: the higher mean, then the smaller value.
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
ARCHIVES = ROOT / "research" / "archives"
SWINGUP_BAR = 394.6 - 84.0  # the 10-seed svgd-a2c row's mean minus its half width
HOPPER_SHARE = 0.9
GOAL = 1.0  # SparseHalfCheetah's reward_threshold


def candidate(kernel: dict, repulsion: dict) -> str:
    """K1..K6 from the grid values (the registration's table)."""
    column = {("share", 0.05): 0, ("share", 0.2): 1, ("bandit", None): 2}[
        (repulsion["name"], repulsion.get("target") if repulsion["name"] == "share" else None)]
    return f"K{column + 1 + (3 if kernel.get('space') == 'weights' else 0)}"


def _grid(params: str) -> dict[str, dict]:
    """``update.kernel={...} update.repulsion={...}`` (compare's params) as mappings."""
    out, rest = {}, params
    for key in ("update.repulsion", "update.kernel"):
        head, sep, value = rest.rpartition(f"{key}=")
        if sep:
            out[key] = ast.literal_eval(value.strip())
            rest = head
    return out


def selected(part: str) -> list[dict] | None:
    path = ARCHIVES / f"repulsion_selection_{part}" / "comparison.csv"
    if not path.exists():
        return None
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["policy"] == "ensemble-select"]


def by_candidate(rows: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["algo"].startswith("independent"):
            out["independent"].append(float(r["eval_mean"]))
        else:
            grid = _grid(r["params"])
            out[candidate(grid["update.kernel"], grid["update.repulsion"])].append(float(r["eval_mean"]))
    return dict(out)


def swingup_peaks() -> dict[str, list[float]] | None:
    path = ARCHIVES / "repulsion_selection_swingup" / "results.csv.gz"
    if not path.exists():
        return None
    peaks: dict[tuple, float] = {}
    names: dict[tuple, str] = {}
    with gzip.open(path, "rt", newline="") as f:
        for r in csv.DictReader(f):
            key = (r["trial_id"],)
            value = float(r["rollout/ep_rew_max_particle"])
            if np.isfinite(value):
                peaks[key] = max(peaks.get(key, -np.inf), value)
            names[key] = candidate(ast.literal_eval(r["update.kernel"]), ast.literal_eval(r["update.repulsion"]))
    out: dict[str, list[float]] = defaultdict(list)
    for key, peak in peaks.items():
        out[names[key]].append(peak)
    return dict(out)


def grid_pick(part: str, key: str) -> str:
    """Print the grid values' goals and means; return the picked value (``waiting`` without the archive)."""
    rows = selected(part)
    if rows is None:
        print(f"{part}: not archived yet")
        return "waiting"
    groups: dict[float, list[float]] = defaultdict(list)
    for r in rows:
        groups[float(r["params"].split(f"{key}=")[1].split()[0])].append(float(r["eval_mean"]))
    table = {v: (sum(x >= GOAL for x in xs), float(np.mean(xs))) for v, xs in groups.items()}
    for v, (goals, mean) in sorted(table.items()):
        print(f"{part}: {key}={v:g} goals {goals}/{len(groups[v])} mean {mean:.1f}")
    best = max(table, key=lambda v: (table[v][0], table[v][1], -v))
    print(f"{part}: picked {key}={best:g}")
    return f"{best:g}"


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False).parse_args(argv)
    sparse, hopper, swingup = selected("sparse"), selected("hopper"), swingup_peaks()
    if sparse is None:
        print("repulsion_pick pick=waiting (the sparse part is not archived)")
        return 1
    goals = {k: (sum(v >= GOAL for v in vs), float(np.mean(vs)), len(vs)) for k, vs in by_candidate(sparse).items()}
    hopper_means = {k: float(np.mean(v)) for k, v in by_candidate(hopper).items()} if hopper else None
    swing = {k: float(np.mean(v)) for k, v in swingup.items()} if swingup else None
    for k in sorted(goals):
        parts = [f"{k}: SparseHalfCheetah goals {goals[k][0]}/{goals[k][2]} mean {goals[k][1]:.1f}"]
        if hopper_means is not None and "independent" in hopper_means:
            parts.append(f"Hopper {hopper_means.get(k, float('nan')):.1f} "
                         f"({hopper_means.get(k, float('nan')) / hopper_means['independent']:.0%} of independent)")
        if swing is not None:
            parts.append(f"swing-up peak {swing.get(k, float('nan')):.1f}")
        print("; ".join(parts))
    entropy, floor = grid_pick("entropy", "estimator.ent_coef"), grid_pick("floor", "policy.log_std_min")
    if hopper_means is None or "independent" not in hopper_means or swing is None:
        print(f"repulsion_pick pick=waiting (the Hopper and swing-up parts) entropy={entropy} floor={floor}")
        return 1
    hopper_ok = {k for k in goals if hopper_means.get(k, -np.inf) >= HOPPER_SHARE * hopper_means["independent"]}
    both = {k for k in hopper_ok if swing.get(k, -np.inf) >= SWINGUP_BAR}
    pool, note = (both, "passes both screens") if both else (
        (hopper_ok, "rule 3: none passes both; the swing-up keeps its own setting") if hopper_ok else
        (set(goals), "rule 3: none passes the Hopper screen"))
    pick = max(pool, key=lambda k: (goals[k][0], goals[k][1], hopper_means.get(k, -np.inf)))
    print(f"repulsion_pick pick={pick} ({note}) entropy={entropy} floor={floor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
