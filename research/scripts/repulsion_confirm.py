#!/usr/bin/env python
"""The repulsion study's confirmation phase, analysed as registered (research/results/repulsion_study.md):
the goal counts and the 9 primary tests, the no-harm intervals, the swing-up and the bandits.

    python research/scripts/repulsion_confirm.py [--archives research/archives]

Reads ``<archives>/repulsion_confirm_<part>/``: ``comparison.csv`` (``steinrl compare``; its
``ensemble-select`` rows, the held-out pick on the final weights) for the exploration, entropy, floor,
sb3 and dense parts; ``results.csv.gz`` for the swing-up (the peak of ``rollout/ep_rew_max_particle``)
and the bandits (the final ``bandit/cumulative_regret``, its largest value). A part not archived yet
is reported as such and its tests are left out (a family with a missing member is not corrected: the
summary says ``waiting``).

- **Primary** (family of 9, Holm at 0.05): on SparseHalfCheetah, EpisodicHopper and EpisodicWalker2d,
  Stein against each ``independent-ppo`` row (plain, + entropy, + floor), one-sided Fisher's exact test
  on the goal counts (a goal: the evaluation return >= the task's registered ``reward_threshold``). A
  task is won when its three comparisons are significant after correction.
- **Secondary**, uncorrected p beside: MountainCar's goal counts; SB3's default PPO.
- **No harm**, per dense task: Stein − ``independent-ppo``, Welch's 95 % interval, its two-sided p with
  Holm over the 6 tasks; "below" only where that corrected p < 0.05; the mean ratio beside (the target:
  >= 95 % of independent's, or the interval includes 0).
- **Swing-up**: the mean peak of 10 seeds against 394.6 − 84.0 = 310.6, with its t interval.
- **Bandits**: Stein − ``independent-ts`` in cumulative regret, Welch's 95 % interval (the target: the
  interval's lower end <= 0, i.e. not worse beyond the interval).

Then the closing table (one row per task family: shipped Stein, independent, the explaining baseline,
the result), and last a summary line: ``repulsion_confirm exploration=<won>/3 ... moonshot=<yes|no|waiting>``.

- **The shipping rule** (registered 2026-11-29, before the SB3, no-harm, swing-up and bandit parts ran):
  W, the weight-space kernel at lambda = 1, is scored as K1 is on the dense tasks (``weights_dense``
  against the dense part's ``independent-ppo``), on Mushroom (``weights_bandits`` against the bandits
  part's ``independent-ts``) and on the sparse tasks (``weights_sparse``, secondary); ``shipped=`` in the
  summary line says which setting the files ship (``shipped``).
- **Addendum** (registered after the exploration part, before its runs): MountainCar's per-task exception,
  the weight-space kernel, against ``independent-ppo`` on seeds 210-219 (``repulsion_confirm_mountaincar``):
  held when it reaches the goal on >= 9 of 10 and a two-sided Fisher's exact test finds no difference
  (p >= 0.05); not part of the moonshot, which asks one setting unchanged.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import stats

from steinrl.run.sweep_report import mean_ci, read_results_csv

ROOT = Path(__file__).resolve().parents[2]
ALPHA = 0.05
SWINGUP_BAR = 394.6 - 84.0  # the 10-seed svgd-a2c row's mean minus its half width (the target)
SPARSE = ("SparseHalfCheetah", "EpisodicHopper", "EpisodicWalker2d")
SECONDARY = ("MountainCarContinuous-v0",)
DENSE = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5", "InvertedDoublePendulum-v5")
#: row label -> (part, algo)
ROWS = {
    "Stein": ("exploration", "svgd-ppo"),
    "independent": ("exploration", "independent-ppo"),
    "+ entropy": ("entropy", "independent-ppo"),
    "+ floor": ("floor", "independent-ppo"),
    "SB3": ("sb3", "sb3-ppo"),
}
BASELINES = ("independent", "+ entropy", "+ floor")
#: the policy ``steinrl compare`` scores per run: the particle picked on held-out episodes; SB3's one policy
SCORED_POLICIES = ("ensemble-select", "sb3")
#: the two settings the shipping rule weighs (the page's change of 2026-11-29) -> family -> the part holding
#: their Stein runs (K1's sparse runs are the primary family's ``Stein`` row; W's: ``weights_sparse``)
STEIN_PARTS = {"K1": {"dense": "dense", "bandits": "bandits"},
               "W": {"dense": "weights_dense", "bandits": "weights_bandits"}}


# ---------------------------------------------------------------------------------------------- statistics
def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the i-th smallest (0-based) times
    ``n - i``, made non-decreasing along the sorted order, capped at 1."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def fisher(goals_a: int, n_a: int, goals_b: int, n_b: int, alternative: str) -> float:
    """Fisher's exact p on two goal counts (``alternative`` as scipy's: "greater", "two-sided")."""
    return float(stats.fisher_exact([[goals_a, n_a - goals_a], [goals_b, n_b - goals_b]],
                                    alternative=alternative).pvalue)


def fisher_greater(goals_a: int, n_a: int, goals_b: int, n_b: int) -> float:
    """One-sided Fisher's exact p for H1: row a reaches the goal more often than row b."""
    return fisher(goals_a, n_a, goals_b, n_b, alternative="greater")


def goal_count(values: Sequence[float], threshold: float) -> tuple[int, int]:
    """``(runs whose evaluation return is >= threshold, runs)``."""
    return sum(v >= threshold for v in values), len(values)


def welch(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float, float]:
    """``(mean(x) - mean(y), low, high, p)``: Welch's 95 % interval and two-sided p."""
    result = stats.ttest_ind(np.asarray(x, float), np.asarray(y, float), equal_var=False)
    interval = result.confidence_interval(0.95)
    return float(np.mean(x) - np.mean(y)), float(interval.low), float(interval.high), float(result.pvalue)


# ---------------------------------------------------------------------------------------------- reading
def _threshold(env: str) -> float:
    from steinrl.run.compare_table import reward_threshold

    value = reward_threshold(env)
    if value is None:
        raise SystemExit(f"error: {env} has no registered reward_threshold")
    return float(value)


def returns(archives: Path, part: str) -> dict[tuple[str, str], list[float]] | None:
    """``(env, algo) -> [evaluation return per seed]`` of a part's scored rows (``SCORED_POLICIES``); None if
    absent."""
    path = archives / f"repulsion_confirm_{part}" / "comparison.csv"
    if not path.exists():
        return None
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["policy"] in SCORED_POLICIES:
                out[(row["env"], row["algo"])].append(float(row["eval_mean"]))
    return dict(out)


def per_trial(archives: Path, part: str, final: bool) -> dict[str, list[float]] | None:
    """``algo -> [each trial's peak (or, with ``final``, its last value) of its headline metric]`` from a
    part's ``results.csv.gz`` (read by the sweep report's reader); None if absent."""
    path = archives / f"repulsion_confirm_{part}" / "results.csv.gz"
    if not path.exists():
        return None
    out: dict[str, list[float]] = defaultdict(list)
    for trial in sorted(read_results_csv(path), key=lambda t: t.trial_id):
        curve = trial.curve()
        if curve:
            out[trial.algo].append(curve[max(curve)] if final else max(curve.values()))
    return dict(out)


# ---------------------------------------------------------------------------------------------- analysis
class Verdict(NamedTuple):
    """A part's summary value (``waiting`` without its archives), whether its targets hold (None: waiting)
    and its rows of the closing table (task family, shipped Stein, independent, explaining baseline, result)."""

    summary: str
    met: bool | None
    rows: tuple[tuple[str, str, str, str, str], ...] = ()
    score: float | None = None  # what the shipping rule compares when no setting clears (higher is better)


def exploration(archives: Path) -> Verdict:
    """Print the goal table and the primary family (won: ``won/3``)."""
    parts = {p: returns(archives, p) for p in {part for part, _ in ROWS.values()}}
    goals: dict[tuple[str, str], tuple[int, int]] = {}
    print("| task | goal | " + " | ".join(ROWS) + " |")
    print("|---|---|" + "---|" * len(ROWS))
    for env in (*SPARSE, *SECONDARY):
        threshold, cells = _threshold(env), []
        for label, (part, algo) in ROWS.items():
            values = (parts[part] or {}).get((env, algo))
            if values is None:
                cells.append("waiting")
                continue
            goals[(env, label)] = goal_count(values, threshold)
            cells.append(f"{goals[(env, label)][0]}/{len(values)} (mean {np.mean(values):.1f})")
        print(f"| {env} | ≥ {threshold:g} | " + " | ".join(cells) + " |")
    family = [(env, base) for env in SPARSE for base in BASELINES]
    complete = all((env, "Stein") in goals and (env, base) in goals for env, base in family)
    raw = {key: fisher_greater(*goals[(key[0], "Stein")], *goals[key]) for key in family
           if (key[0], "Stein") in goals and key in goals}
    adjusted = dict(zip(raw, holm(list(raw.values())))) if complete else {}
    print("\nPrimary family (one-sided Fisher, Stein > row; Holm over 9):")
    for env, base in family:
        if (env, base) not in raw:
            print(f"  {env} Stein vs {base}: waiting")
            continue
        corrected = f"{adjusted[(env, base)]:.4f}" if complete else "waiting (family incomplete)"
        print(f"  {env} Stein vs {base}: p {raw[(env, base)]:.4f}, Holm {corrected}")
    for env in SECONDARY:
        for base in (*BASELINES, "SB3"):
            if (env, "Stein") in goals and (env, base) in goals:
                p = fisher_greater(*goals[(env, "Stein")], *goals[(env, base)])
                print(f"  secondary {env} Stein vs {base}: p {p:.4f} (uncorrected)")
    if not complete:
        return Verdict("waiting", None)
    won = sum(all(adjusted[(env, base)] < ALPHA for base in BASELINES) for env in SPARSE)
    counts_met = all(goals[(env, "Stein")][0] >= 7 and all(goals[(env, b)][0] <= 3 for b in BASELINES)
                     for env in SPARSE)

    def cell(label: str, envs: Sequence[str]) -> str:
        return ", ".join(f"{goals[(e, label)][0]}/{goals[(e, label)][1]}" if (e, label) in goals else "waiting"
                         for e in envs)

    rows = [("sparse MuJoCo (SparseHalfCheetah, EpisodicHopper, EpisodicWalker2d): goals reached",
             cell("Stein", SPARSE), cell("independent", SPARSE),
             f"+ entropy {cell('+ entropy', SPARSE)}; + floor {cell('+ floor', SPARSE)}",
             f"won on {won} of 3 (one-sided Fisher, Holm over 9)")]
    if all((e, label) in goals for e in SECONDARY for label in ROWS):
        rows.append(("MountainCarContinuous-v0: goals reached", cell("Stein", SECONDARY),
                     cell("independent", SECONDARY),
                     f"+ entropy {cell('+ entropy', SECONDARY)}; + floor {cell('+ floor', SECONDARY)}",
                     f"secondary; SB3's default PPO {cell('SB3', SECONDARY)}"))
    return Verdict(f"{won}/3", counts_met and won >= 2, tuple(rows))


def no_harm(archives: Path, setting: str = "K1") -> Verdict:
    """Print the per-task differences of ``setting``'s ``svgd-ppo`` runs (K1: the dense part; W: the
    addendum's ``weights_dense``) from the dense part's ``independent-ppo`` (summary: ``<n>below``, the tasks
    significantly below; score: the smallest mean ratio)."""
    stein, independent = returns(archives, STEIN_PARTS[setting]["dense"]), returns(archives, "dense")
    if stein is None or independent is None or any(
            (env, "svgd-ppo") not in stein or (env, "independent-ppo") not in independent for env in DENSE):
        print(f"\nNo harm, {setting}: waiting")
        return Verdict("waiting", None)
    pairs = {env: (stein[(env, "svgd-ppo")], independent[(env, "independent-ppo")]) for env in DENSE}
    tests = {env: welch(*pairs[env]) for env in DENSE}
    adjusted = dict(zip(tests, holm([t[3] for t in tests.values()])))
    print(f"\nNo harm, {setting} (Stein − independent-ppo, Welch 95 %; two-sided p, Holm over 6):")
    below, met, ratios = 0, True, []
    for env, (diff, low, high, p) in tests.items():
        ratio = float(np.mean(pairs[env][0]) / np.mean(pairs[env][1]))
        ratios.append(ratio)
        significant_below = adjusted[env] < ALPHA and diff < 0
        below += significant_below
        met &= (ratio >= 0.95 or low <= 0 <= high) and not significant_below
        if significant_below or adjusted[env] < ALPHA:
            verdict = "below" if significant_below else "above"
        elif low <= 0 <= high:
            verdict = f"no detectable difference (interval {low:.1f} to {high:.1f})"
        else:  # the uncorrected interval excludes 0, Holm's p does not reach ALPHA
            verdict = f"{'below' if diff < 0 else 'above'} uncorrected, not after Holm"
        print(f"  {env}: {diff:+.1f} [{low:.1f}, {high:.1f}], ratio {ratio:.0%}, p {p:.4f}, Holm {adjusted[env]:.4f}: "
              f"{verdict}")
    row = (f"dense MuJoCo (6 tasks), {setting}: Stein's mean / independent's",
           f"{min(ratios) * 100:.0f} % to {max(ratios) * 100:.0f} %", "100 %", "–",
           f"below on {below} of 6 (Welch, Holm over 6); target {'met' if met else 'missed'}")
    return Verdict(f"{below}below", met, (row,), min(ratios))


def swingup(archives: Path) -> Verdict:
    peaks = per_trial(archives, "swingup", final=False)  # rollout/ep_rew_max_particle's peak
    if not peaks:
        print("\nSwing-up: waiting")
        return Verdict("waiting", None)
    values = [v for vs in peaks.values() for v in vs]
    mean, half = mean_ci(values)
    print(f"\nSwing-up (svgd-a2c, peak of rollout/ep_rew_max_particle, {len(values)} seeds): {mean:.1f} ± {half:.1f} "
          f"against {SWINGUP_BAR:.1f}")
    row = ("exact swing-up (svgd-a2c): mean peak", f"{mean:.1f} ± {half:.1f}", "–", "–",
           f"{'reaches' if mean >= SWINGUP_BAR else 'misses'} {SWINGUP_BAR:.1f}")
    return Verdict(f"{mean:.1f}", mean >= SWINGUP_BAR, (row,))


def bandits(archives: Path, setting: str = "K1") -> Verdict:
    """``setting``'s ``svgd-ts`` regret (K1: the bandits part; W: ``weights_bandits``) against the bandits
    part's ``independent-ts`` (score: minus Stein's mean regret)."""
    stein = (per_trial(archives, STEIN_PARTS[setting]["bandits"], final=True) or {}).get("svgd-ts")
    independent = (per_trial(archives, "bandits", final=True) or {}).get("independent-ts")  # the last round's regret
    if not stein or not independent:
        print(f"\nBandits, {setting}: waiting")
        return Verdict("waiting", None)
    diff, low, high, p = welch(stein, independent)
    (mean, s_half), (independent_mean, i_half) = mean_ci(stein), mean_ci(independent)
    print(f"\nBandits, {setting} (Mushroom, cumulative regret; Stein {mean:.1f}, independent-ts "
          f"{independent_mean:.1f}): Stein − independent {diff:+.1f} [{low:.1f}, {high:.1f}], p {p:.4f}")
    row = (f"Mushroom (Thompson sampling), {setting}: cumulative regret", f"{mean:.1f} ± {s_half:.1f}",
           f"{independent_mean:.1f} ± {i_half:.1f}", "–", f"difference {diff:+.1f} ({low:.1f} to {high:.1f}, Welch)")
    return Verdict(f"{diff:+.1f}", low <= 0, (row,), -mean)


def mountaincar_exception(archives: Path) -> Verdict:
    """The addendum: MountainCar's per-task exception (the weight-space kernel) against ``independent-ppo``
    on seeds 210-219; held when it reaches the goal on >= 9 of 10 and the two-sided Fisher p >= 0.05."""
    data = returns(archives, "mountaincar")
    env = SECONDARY[0]
    if data is None or any((env, a) not in data for a in ("svgd-ppo", "independent-ppo")):
        print("\nMountainCar's exception (addendum): waiting")
        return Verdict("waiting", None)
    threshold = _threshold(env)
    (stein, n_s), (independent, n_i) = (goal_count(data[(env, a)], threshold) for a in ("svgd-ppo", "independent-ppo"))
    p = fisher(stein, n_s, independent, n_i, alternative="two-sided")
    diff, low, high, _ = welch(data[(env, "svgd-ppo")], data[(env, "independent-ppo")])
    held = stein >= 9 and p >= ALPHA
    print(f"\nMountainCar's exception (addendum, weight-space kernel, goal >= {threshold:g}): {stein}/{n_s} against "
          f"independent-ppo {independent}/{n_i}, two-sided Fisher p {p:.4f}; eval return difference {diff:+.1f} "
          f"[{low:.1f}, {high:.1f}]: {'held' if held else 'missed'}")
    row = ("MountainCarContinuous-v0, its exception (weight-space kernel, seeds 210-219): goals reached",
           f"{stein}/{n_s}", f"{independent}/{n_i}", "–",
           f"{'held' if held else 'missed'} (two-sided Fisher p {p:.2f}; the bar: ≥ 9 of 10 and p ≥ 0.05)")
    return Verdict(f"{stein}/{n_s}", held, (row,))


def weights_sparse(archives: Path) -> Verdict:
    """W's sparse goal counts against the exploration, entropy and floor parts' ``independent-ppo`` rows:
    one-sided Fisher (W reaches it more often), uncorrected and secondary: not in the family of 9."""
    stein = returns(archives, "weights_sparse")
    rows = {label: returns(archives, ROWS[label][0]) for label in BASELINES}
    if stein is None or None in rows.values() or any(
            (env, "svgd-ppo") not in stein or (env, "independent-ppo") not in rows[b] for env in SPARSE for b in rows):
        print("\nW on the sparse tasks (secondary): waiting")
        return Verdict("waiting", None)
    print("\nW on the sparse tasks (secondary; one-sided Fisher, W > row, uncorrected):")
    cells: dict[str, list[str]] = defaultdict(list)
    for env in SPARSE:
        threshold = _threshold(env)
        goals = goal_count(stein[(env, "svgd-ppo")], threshold)
        tests = []
        for label in BASELINES:
            base = goal_count(rows[label][(env, "independent-ppo")], threshold)
            cells[label].append(f"{base[0]}/{base[1]}")
            tests.append(f"vs {label} {base[0]}/{base[1]}: p {fisher_greater(*goals, *base):.4f}")
        cells["W"].append(f"{goals[0]}/{goals[1]}")
        print(f"  {env}: W {goals[0]}/{goals[1]}; " + "; ".join(tests))
    row = ("sparse MuJoCo, W: goals reached", ", ".join(cells["W"]), ", ".join(cells["independent"]),
           f"+ entropy {', '.join(cells['+ entropy'])}; + floor {', '.join(cells['+ floor'])}",
           "secondary (one-sided Fisher, uncorrected; not in the family of 9)")
    return Verdict(",".join(cells["W"]), None, (row,))


def shipped(k1: dict[str, Verdict], w: dict[str, Verdict]) -> str:
    """The shipping rule (the page's change of 2026-11-29). ``W`` when W clears the dense, bandit, swing-up
    and MountainCar targets; otherwise ``family:setting`` per family: W where it clears, else K1 where it
    clears, else the higher score marked ``(missed)``; the swing-up keeps W (K1 failed its screen), and
    MountainCar keeps W only where the addendum holds (else its exception is ``withdrawn``). ``waiting``
    while a verdict it needs is."""
    if None in (w["dense"].met, w["bandits"].met, w["swingup"].met, w["mountaincar"].met,
                k1["dense"].met, k1["bandits"].met):
        return "waiting"
    if all(w[family].met for family in ("dense", "bandits", "swingup", "mountaincar")):
        return "W"
    picks = []
    for family in ("dense", "bandits"):
        if w[family].met or k1[family].met:
            picks.append(f"{family}:{'W' if w[family].met else 'K1'}")
        else:
            picks.append(f"{family}:{'W' if w[family].score >= k1[family].score else 'K1'}(missed)")
    picks.append("swingup:W" + ("" if w["swingup"].met else "(missed)"))
    picks.append("mountaincar:" + ("W" if w["mountaincar"].met else "withdrawn"))
    return ",".join(picks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--archives", type=Path, default=ROOT / "research" / "archives",
                        help="the folder holding repulsion_confirm_<part>/ (default research/archives)")
    args = parser.parse_args(argv)
    if not args.archives.is_dir():
        parser.error(f"--archives {args.archives}: not a folder")
    results = {"exploration": exploration(args.archives), "no_harm": no_harm(args.archives),
               "swingup": swingup(args.archives), "bandits": bandits(args.archives)}
    exception = mountaincar_exception(args.archives)  # not part of the moonshot: a per-task exception
    weights = {"dense": no_harm(args.archives, "W"), "bandits": bandits(args.archives, "W"),
               "sparse": weights_sparse(args.archives), "swingup": results["swingup"], "mountaincar": exception}
    rows = [row for verdict in (*results.values(), exception, *(weights[f] for f in ("sparse", "dense", "bandits")))
            for row in verdict.rows]
    if rows:
        print("\n| task family | shipped Stein | independent | explaining baseline | result |\n|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    met = [verdict.met for verdict in results.values()]
    moonshot = "waiting" if None in met else ("yes" if all(met) else "no")
    print("repulsion_confirm " + " ".join(f"{k}={v.summary}" for k, v in results.items())
          + f" mountaincar_exception={exception.summary} moonshot={moonshot}"
          + f" shipped={shipped({'dense': results['no_harm'], 'bandits': results['bandits']}, weights)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
