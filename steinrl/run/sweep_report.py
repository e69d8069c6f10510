"""The outputs of ``steinrl sweep``, read from the trials' own results (nothing is re-run).

- ``results.csv``: one row per trial and iteration (trial id, algo, env, seed, the grid /
  search values, the iteration, the headline metric, every other scalar metric, wall time);
- ``summary.md``: per env x algo (x grid point): seeds, seed mean and 95 % confidence
  interval (Student t, n - 1 degrees of freedom) of each trial's PEAK and FINAL headline
  value, where the seed-mean curve first reaches 95 % of its rise to its peak, and the
  mean wall time per trial;
- ``curves.png``: one panel per env, per algo (x grid point) the seed-mean headline curve
  with its 95 % confidence band (none for fewer than 3 seeds; within the seeds' range),
  against the iteration from 0 (bandits: cumulative regret against the rounds played).

The maths (:func:`student_t_quantile`, :func:`mean_ci`, :func:`group_stats`) is pure and
needs nothing beyond the standard library and numpy.
"""

from __future__ import annotations

import csv
import gzip
import math
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from steinrl.errors import ConfigError

__all__ = ["TrialRun", "GroupStats", "block_result", "student_t_quantile", "mean_ci", "group_stats", "trial_runs",
           "read_results_csv", "write_outputs", "write_results_csv", "write_summary", "plot_curves", "report"]


@dataclass(frozen=True)
class TrialRun:
    """One trial's results: who it is and its deduplicated rows, one per iteration."""

    trial_id: str
    algo: str
    env: str
    seed: int
    params: dict[str, Any]  #: grid point and / or search values, by config key
    metric: str  #: the headline metric of the algorithm's job
    x_key: str  #: what the curves are drawn against ("iteration", or "bandit/rounds")
    rows: list[dict[str, float]]  #: {"iteration": k, metric: value, ...} in iteration order
    wall: float  #: seconds of training (Ray's time_total_s, summed over resumes)

    @property
    def mode(self) -> str:
        """``max`` or ``min``: the direction in which the algorithm's job's headline metric is better."""
        from steinrl.run.algos import parse_algo

        return parse_algo(self.algo).job.headline_mode

    def curve(self) -> dict[float, float]:
        """``x -> headline value`` of the iterations that report it."""
        return {float(r[self.x_key]): float(r[self.metric]) for r in self.rows
                if isinstance(r.get(self.metric), (int, float)) and isinstance(r.get(self.x_key), (int, float))}


# --- maths ------------------------------------------------------------------------------
def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) of Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3-4, exact)."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:  # sin θ (1 + c²/2 + 1·3/(2·4) c⁴ + ... up to c^(df-2))
        term = total = 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = 1.0  # 2/π (θ + sin θ cos θ (1 + 2/3 c² + 2·4/(3·5) c⁴ + ... up to c^(df-3)))
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + s * math.cos(theta) * total)


def student_t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile (0.5 < q < 1) of Student's t with integer ``df`` >= 1, by bisection."""
    if not (0.5 < q < 1) or df < 1:
        raise ValueError(f"need 0.5 < q < 1 and df >= 1, got q={q}, df={df}")
    target, lo, hi = 2 * q - 1, 0.0, 1.0
    while _t_two_sided(hi, df) < target:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_two_sided(mid, df) < target else (lo, mid)
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Mean and the half width of its ``level`` confidence interval (Student t, n - 1 dof;
    sample standard deviation). NaNs are dropped; fewer than 2 values give a NaN half width."""
    x = np.asarray([v for v in values if v == v], dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    if len(x) < 2:
        return float(x[0]), float("nan")
    half = student_t_quantile(0.5 + level / 2, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return float(x.mean()), half


@dataclass(frozen=True)
class GroupStats:
    """Across the seeds of one env x algo (x grid point)."""

    n: int  #: seeds
    peak: tuple[float, float]  #: mean and 95 % CI half width of each seed's best value
    final: tuple[float, float]  #: the same of each seed's last value
    x95: float | None  #: first x where the seed-mean curve reaches 95 % of its rise to its peak
    x: list[float]  #: the x every seed reached
    mean: list[float]  #: seed-mean curve on ``x``
    half: list[float]  #: its 95 % CI half width


def group_stats(curves: Sequence[Mapping[float, float]], mode: str = "max") -> GroupStats:
    """Seed statistics of headline curves (one ``{x: value}`` per seed).

    ``mode`` "max": the peak is the largest value ("min": the smallest, for a regret). The
    seed-mean curve is taken on the x that every seed reached; ``x95`` is the first x at
    which it is within 5 % of its rise from its first value to its peak (a definition that
    also holds for negative returns).
    """
    best = np.nanmax if mode == "max" else np.nanmin
    curves = [c for c in curves if c]
    peaks = [float(best(list(c.values()))) for c in curves]
    finals = [c[max(c)] for c in curves]
    xs = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    stats = [mean_ci([c[x] for c in curves]) for x in xs]
    mean = [m for m, _ in stats]
    x95 = None
    if mean and any(m == m for m in mean):
        top, first = float(best(mean)), mean[0]
        threshold = first + 0.95 * (top - first)
        hits = [x for x, m in zip(xs, mean) if (m >= threshold if mode == "max" else m <= threshold)]
        x95 = hits[0] if hits else None
    return GroupStats(len(curves), mean_ci(peaks), mean_ci(finals), x95, xs, mean, [h for _, h in stats])


# --- a trial's results ------------------------------------------------------------------
def block_result(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One trial result from the rows of the ``run.report_every`` iterations it covers: the last
    row, with its episode keys (``rollout/...``, ``particles/...``) those of the latest row that
    completed an episode (``rollout/episodes`` > 0), so that a task ending few episodes per
    iteration (MountainCarContinuous: 8-step iterations) still reports its latest returns."""
    ended = [row for row in rows if row.get("rollout/episodes", 0) > 0]
    episodes = {k: v for k, v in ended[-1].items() if k.startswith(("rollout/", "particles/"))} if ended else {}
    return {**rows[-1], **episodes}


def trial_runs(results: Any) -> tuple[list[TrialRun], list[str]]:
    """The :class:`TrialRun` of every trial of a Ray Tune ``ResultGrid`` that reported, and a
    line per failed trial. Rows repeated by a resume (reported after the checkpoint it resumed
    from) count once: the last report of each iteration."""
    from steinrl.run.algos import parse_algo

    runs, failed = [], []
    for result in results:
        if result.error is not None:
            last = [line for line in str(result.error).splitlines() if line.strip()][-1:] or ["(no message)"]
            failed.append(f"{Path(result.path).name} failed: {last[0].strip()[:300]} "
                          f"(see {Path(result.path) / 'error.txt'})")
        df = result.metrics_dataframe
        if df is None or df.empty:  # never reported (not started yet, or failed in setup)
            continue
        trial = result.config["trial"]
        df = df.drop_duplicates("training_iteration", keep="last").sort_values("training_iteration")
        keys = [c for c in df.columns if "/" in c and not c.startswith("config/")]  # steinrl's <group>/<name>
        rows = [{"iteration": int(r["training_iteration"]), **{k: r[k] for k in keys}} for r in df.to_dict("records")]
        job = parse_algo(trial["algo"]).job
        runs.append(TrialRun(str(df["trial_id"].iloc[-1]), trial["algo"], trial["env"], int(trial["seed"]),
                             {**trial["params"], **(result.config.get("search") or {})}, job.headline_metric,
                             job.x_metric or "iteration", rows, float(df["time_total_s"].iloc[-1])))
    return runs, failed


# --- outputs ----------------------------------------------------------------------------
def write_outputs(trials: Sequence[TrialRun], out: Path, command: str, notes: Sequence[str] = ()) -> None:
    """``results.csv``, ``summary.md`` and ``curves.png`` in ``out``."""
    write_results_csv(trials, out / "results.csv")
    write_summary(trials, out / "summary.md", command, notes)
    plot_curves(trials, out / "curves.png")


def _groups(trials: Sequence[TrialRun]) -> dict[tuple, list[TrialRun]]:
    """Trials by (env, algo, grid / search values), in first-seen order."""
    groups: dict[tuple, list[TrialRun]] = {}
    for t in trials:
        groups.setdefault((t.env, t.algo, tuple((k, repr(v)) for k, v in t.params.items())), []).append(t)
    return groups


def _label(trial: TrialRun) -> str:
    """A curve's legend: the algo and the trial's grid values in short form (``svgd-a2c kernel=imq(β=-0.3)``)."""
    from steinrl.run.labels import settings_label

    return " ".join(part for part in (trial.algo, settings_label(trial.params)) if part)


def write_results_csv(trials: Sequence[TrialRun], path: Path, headline_only: bool = False) -> None:
    """``results.csv``: one row per trial and iteration; gzip-compressed where ``path`` ends
    in ``.gz``. ``headline_only`` keeps only each trial's headline metric (an archive small
    enough to keep beside the docs)."""
    params = list(dict.fromkeys(k for t in trials for k in t.params))
    headlines = list(dict.fromkeys(t.metric for t in trials))
    x_keys = [k for k in dict.fromkeys(t.x_key for t in trials) if k != "iteration"]  # (kept in an archive)
    others = x_keys if headline_only else sorted({k for t in trials for r in t.rows for k in r}
                                                 - {"iteration", *headlines})
    columns = ["trial_id", "algo", "env", "seed", *params, "iteration", *headlines, *others, "wall_s"]
    with _open_text(path, "w") as f:
        writer = csv.DictWriter(f, columns, restval="", extrasaction="ignore")
        writer.writeheader()
        for t in trials:
            for r in t.rows:
                writer.writerow({"trial_id": t.trial_id, "algo": t.algo, "env": t.env, "seed": t.seed,
                                 **t.params, **r, "wall_s": round(t.wall, 3)})


def read_results_csv(path: str | Path, extra_params: Mapping[str, Any] | None = None) -> list[TrialRun]:
    """The trials of a ``results.csv`` (as :func:`write_results_csv` wrote it), so that the
    results of several sweeps can be reported together. An archive binned on a logged x
    (``combine_sweeps.py --x KEY --archive``: the headline and one ``time/...`` column) is read
    against that x, so that its summary is made again as it was.

    :param extra_params: added to every trial's grid values (e.g. ``{"variant": "frozen"}``:
        tells apart trials of one algo that came from sweeps with different fixed config).
    """
    import yaml

    from steinrl.run.algos import parse_algo

    columns, rows_by_trial = _read_trial_rows(path)
    params = columns[columns.index("seed") + 1:columns.index("iteration")]
    headlines = {parse_algo(rows[0]["algo"]).job.headline_metric for rows in rows_by_trial.values()}
    kept = [c for c in columns[columns.index("iteration") + 1:] if c not in headlines and c != "wall_s"]
    archived_x = kept[0] if len(kept) == 1 and kept[0].startswith("time/") else None
    trials = []
    for trial_id, rows in rows_by_trial.items():
        first, job = rows[0], parse_algo(rows[0]["algo"]).job
        try:
            values = [{k: float(v) for k, v in r.items() if k not in ("trial_id", "algo", "env", "seed", *params)
                       and v != ""} for r in rows]
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: trial {trial_id} has a value that is not a number") from None
        for v in values:
            v["iteration"] = int(v["iteration"])
            v.pop("wall_s", None)
        grid = {k: yaml.safe_load(first[k]) for k in params if first[k] != ""}
        trials.append(TrialRun(trial_id, first["algo"], first["env"], int(first["seed"]),
                               {**grid, **(extra_params or {})}, job.headline_metric,
                               archived_x or job.x_metric or "iteration", values, float(first["wall_s"])))
    return trials


def _read_trial_rows(path: str | Path) -> tuple[list[str], dict[str, list[dict[str, str]]]]:
    """The columns of a results.csv(.gz) and its rows by trial id; a file that cannot be read
    or is not a steinrl results.csv raises :class:`ConfigError`."""
    rows_by_trial: dict[str, list[dict[str, str]]] = {}
    try:
        with _open_text(path, "r") as f:
            reader = csv.DictReader(f)
            columns = list(reader.fieldnames or [])
            if not {"trial_id", "algo", "env", "seed", "iteration", "wall_s"} <= set(columns):
                raise ConfigError(f"{path} is not a steinrl sweep results.csv (columns: {', '.join(columns[:8])}, "
                                  "...)")
            for row in reader:
                rows_by_trial.setdefault(row["trial_id"], []).append(row)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return columns, rows_by_trial


def _open_text(path: str | Path, mode: str):
    """A text file for the csv module; gzip where the name ends in ``.gz``."""
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", newline="")
    return open(path, mode, newline="")


def _value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _peak(trial: TrialRun) -> float:
    values = list(trial.curve().values())
    return float((np.nanmax if trial.mode == "max" else np.nanmin)(values)) if values else math.nan


def _fmt(mean_half: tuple[float, float]) -> str:
    mean, half = mean_half
    if mean != mean:
        return "–"
    return f"{mean:.1f}" if half != half else f"{mean:.1f} ± {half:.1f}"


def write_summary(trials: Sequence[TrialRun], path: Path, command: str, notes: Sequence[str] = ()) -> None:
    """``summary.md``: the command, then per env a table of env x algo (x grid point) statistics."""
    lines = ["# Sweep summary", "", f"Made by: `{command}`", "", *notes, "" if notes else "",
             "Per group: the number of seeds n; the seed mean ± the half width of its 95 % confidence interval "
             "(Student t, n − 1 degrees of freedom) of each trial's PEAK (best value over its iterations: the "
             "largest return, the smallest regret) and FINAL headline value; *mean-curve peak*: the best value of the "
             "seed-mean curve (the SVPG code's and round 1's metric: at most the mean of the peaks); *reaches 95 %*: "
             "the first iteration "
             "(bandits: round) at which the seed-mean curve is within 5 % of its rise from its first value to its "
             "peak; the mean wall time per trial; each seed's peak, by seed.", ""]
    groups = _groups(trials)
    for env in dict.fromkeys(t.env for t in trials):
        env_groups = {k: g for k, g in groups.items() if k[0] == env}
        params = list(dict.fromkeys(p for g in env_groups.values() for p in g[0].params))
        metrics = ", ".join(dict.fromkeys(f"`{g[0].metric}`" for g in env_groups.values()))
        lines += [f"## {env}", "", f"Headline metric: {metrics}.", "",
                  "| " + " | ".join(["algo", *params, "n", "peak", "final", "mean-curve peak",
                                          "reaches 95 %", "wall s/trial", "per-seed peaks"]) + " |",
                  "|" + "---|" * (len(params) + 8)]
        for group in env_groups.values():
            s = group_stats([t.curve() for t in group], group[0].mode)
            x95 = "–" if s.x95 is None else f"{s.x95:g}"
            best = np.nanmax if group[0].mode == "max" else np.nanmin
            curve_peak = f"{best(s.mean):.1f}" if any(m == m for m in s.mean) else "–"
            cells = [group[0].algo, *(_value(group[0].params.get(p, "")) for p in params), str(s.n), _fmt(s.peak),
                     _fmt(s.final), curve_peak, x95, f"{np.mean([t.wall for t in group]):.1f}",
                     ", ".join(f"{_peak(t):.1f}" for t in sorted(group, key=lambda t: t.seed))]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    path.write_text("\n".join(lines))


def plot_curves(trials: Sequence[TrialRun], path: Path) -> Any:
    """``curves.png``: per env a panel, per group the seed-mean headline curve and its 95 % CI band
    (drawn by :func:`steinrl.run.plotting.draw_panels`, as every learning-curve figure: no band
    for fewer than 3 seeds, the band within the seeds' range). Against the iteration, the x axis
    is the trainer's iteration from 0, as ``metrics.jsonl`` and ``evaluate --plot`` number it
    (``results.csv``'s ``iteration`` is Ray's count of results, from 1)."""
    from steinrl.run.plotting import Curve, Panel, draw_panels

    panels = []
    groups = _groups(trials)
    for env in dict.fromkeys(t.env for t in trials):
        curves, first = [], None
        for (group_env, _, _), group in groups.items():
            if group_env != env:
                continue
            first = first or group[0]
            seed_curves = [t.curve() for t in group]
            s = group_stats(seed_curves, group[0].mode)
            mean, half = np.array(s.mean), np.array(s.half)
            values = np.array([[c[x] for c in seed_curves if c] for x in s.x]).reshape(len(s.x), -1)
            x = [v - 1 for v in s.x] if group[0].x_key == "iteration" else s.x
            with warnings.catch_warnings():  # an x at which no seed has a value: NaN, drawn as a gap
                warnings.simplefilter("ignore", RuntimeWarning)
                low, high = (np.nanmin(values, 1), np.nanmax(values, 1)) if len(s.x) else (None, None)
            curves.append(Curve(f"{_label(group[0])} (n={s.n})", x, mean, mean - half, mean + half, n=s.n,
                                data_low=low, data_high=high))
        panels.append(Panel(env, "iteration" if first.x_key == "iteration" else first.x_key.split("/")[-1],
                            first.metric, curves))
    return draw_panels(panels, path, band="seed mean ± 95 % CI")


def report(results: Any, out: Path, command: str) -> int:
    """Write a sweep's outputs from ``results`` (Ray Tune's ResultGrid) and say how it ended; the
    exit code: 0 all trials finished, 1 some failed, 130 some unfinished."""
    runs, failed = trial_runs(results)
    done = sum(bool(r.error is None and r.metrics and r.metrics.get("done")) for r in results)
    unfinished = len(results) - done - len(failed)
    note = f"Trials: {len(results)} ({done} finished, {len(failed)} failed, {unfinished} unfinished)."
    if runs:
        write_outputs(runs, out, command, [note])
        print(f"wrote {out / 'results.csv'}, {out / 'summary.md'}, {out / 'curves.png'}", file=sys.stderr)
    for line in failed:
        print(f"error: trial {line}", file=sys.stderr)
    if unfinished:
        print(f"interrupted: {unfinished} trials unfinished; run the same command again to continue", file=sys.stderr)
        return 130
    return 1 if failed else 0
