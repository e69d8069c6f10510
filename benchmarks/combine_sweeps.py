#!/usr/bin/env python
"""Report the results of several ``steinrl sweep`` runs together (nothing is re-run).

    python benchmarks/combine_sweeps.py --out /tmp/damped \\
        runs/sweeps/study_damped runs/sweeps/study_damped_more:variant=frozen

Each source is a sweep's output directory (its ``results.csv``), optionally followed by
``:key=value[,key=value]``: values added to every trial of that source, to tell apart
trials of one algorithm that different sweeps ran with different fixed config (``config:``
in the spec is not a grid value, so it is not in ``results.csv``). Trials of the same env,
algo and grid values are one group, so seeds 0-2 of one sweep and seeds 3-9 of another
make one 10-seed row. Writes ``results.csv``, ``summary.md`` and ``curves.png`` to --out.

``--where key=value`` (repeatable) keeps only the trials whose algo, env, seed or grid value
``key`` equals ``value`` (``--where temperature=15``: one grid point of a wider sweep;
``--where "algo=[svgd-a2c, s2vgd-a2c]"``: either).

``--archive`` writes ``results.csv.gz`` with only each trial's headline metric instead of
``results.csv`` (a sweep's full ``results.csv`` is ~0.7 MB per trial; the archive ~13 kB):
the form in which research/archives/ keeps the studies of research/results/, so that their tables
can be re-made, and combined, from the repository alone:

    python benchmarks/combine_sweeps.py runs/sweeps/study_exact_10seeds --archive --out research/archives/exact_10seeds
    python benchmarks/combine_sweeps.py research/archives/exact_10seeds research/archives/dp_10seeds --out /tmp/both

``--x KEY`` draws and summarises against a logged metric instead of the iteration, each
trial's headline averaged in ``--bins`` equal bins of it (from 0 to what every trial of the
task reached), so that seeds and algorithms whose iterations fall at different env steps or
seconds share one x grid: ``--x time/total_env_steps``, ``--x time/total_seconds`` (SB3 rows
recorded before its job logged it have their iteration seconds' running sum instead). The peak of the summary is then
the best bin mean, and an archive keeps the x column.

``--curves-only`` (re)draws only ``curves.png`` (``--out`` may be the source itself: the
figures of research/archives/ are re-drawn from their archives this way).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.errors import ConfigError  # noqa: E402
from steinrl.run.cli_base import Parser, output_dir, run_cli  # noqa: E402
from steinrl.run.compare import split_source  # noqa: E402
from steinrl.run.sweep_report import (  # noqa: E402
    TrialRun,
    plot_curves,
    read_results_csv,
    write_outputs,
    write_results_csv,
    write_summary,
)


def parse_source(text: str) -> tuple[Path, dict]:
    """``DIR`` or ``DIR:key=value,key=value`` -> (results.csv path, extra grid values)."""
    directory, labels = split_source(text)  # steinrl compare's PATH:key=value convention
    params = {key: yaml.safe_load(value) for key, value in labels.items()}
    for name in ("results.csv", "results.csv.gz"):
        path = Path(directory) / name
        if path.is_file():
            return path, params
    raise ConfigError(f"source {text!r}: {directory} has no results.csv or results.csv.gz "
                      "(give a steinrl sweep output directory or a --archive one)")


def parse_where(items: list[str]) -> dict:
    """``["temperature=15", "algo=svgd-a2c"]`` -> ``{"temperature": 15, "algo": "svgd-a2c"}``."""
    where = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--where {item!r}: expected key=value, e.g. --where temperature=15")
        where[key] = yaml.safe_load(value)
    return where


def matches(trial, where: dict) -> bool:
    """Whether a trial's algo / env / seed / grid values equal every ``where`` value (a list:
    one of its values)."""
    fields = {"algo": trial.algo, "env": trial.env, "seed": trial.seed, **trial.params}
    return all(key in fields and (fields[key] in value if isinstance(value, list) else fields[key] == value)
               for key, value in where.items())


def x_values(trial: TrialRun, key: str) -> list[float]:
    """Each row's ``key`` (NaN where missing); ``time/total_seconds``, where a trial's rows lack
    it (SB3 rows from before its job logged it), is the running sum of ``time/iteration_seconds``."""
    if key == "time/total_seconds" and not any(key in r for r in trial.rows):
        return list(np.cumsum([r.get("time/iteration_seconds", math.nan) for r in trial.rows]))
    return [float(r.get(key, math.nan)) for r in trial.rows]


def binned(trials: list[TrialRun], key: str, bins: int) -> list[TrialRun]:
    """Every trial's headline as the mean of its values in ``bins`` equal bins of ``key`` from 0
    to the largest ``key`` every trial of its env reached (bin centres as x: seeds whose
    iterations fall at different env steps or seconds share one x grid, and the noisy
    per-iteration returns are smoothed); a bin without a value is left out."""
    reach = {}
    for t in trials:
        top = np.nanmax(x_values(t, key)) if t.rows else math.nan
        reach[t.env] = min(reach.get(t.env, math.inf), top)
    out = []
    for t in trials:
        edges = np.linspace(0.0, reach[t.env], bins + 1)
        x, y = np.asarray(x_values(t, key)), np.asarray([float(r.get(t.metric, math.nan)) for r in t.rows])
        slot = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
        keep = (x <= edges[-1]) & ~np.isnan(y) & ~np.isnan(x)
        rows = [{"iteration": b, key: float((edges[b] + edges[b + 1]) / 2),
                 t.metric: float(y[keep & (slot == b)].mean())} for b in range(bins) if (keep & (slot == b)).any()]
        out.append(dataclasses.replace(t, x_key=key, rows=rows))
    return out


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="benchmarks/combine_sweeps.py", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="+", metavar="DIR[:key=value,...]", help="sweep output directories")
    p.add_argument("--out", required=True, help="directory for the combined results.csv, summary.md, curves.png")
    p.add_argument("--archive", action="store_true",
                   help="write results.csv.gz with the headline metric only, instead of results.csv")
    p.add_argument("--curves-only", action="store_true", help="draw only curves.png (no results, no summary)")
    p.add_argument("--x", metavar="KEY", help="draw and summarise against this logged metric, binned (e.g. "
                   "time/total_env_steps, time/total_seconds) instead of the iteration")
    p.add_argument("--bins", type=int, default=50, help="with --x: bins from 0 to the x every trial reached (50)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep only trials whose algo, env, seed or grid value KEY equals VALUE (repeatable)")
    args = p.parse_args(argv)
    where = parse_where(args.where)
    trials = []
    for source in args.sources:
        path, params = parse_source(source)
        trials += read_results_csv(path, params)
    trials = [t for t in trials if matches(t, where)]
    if not trials:
        raise ConfigError(f"no trial matches --where {' '.join(args.where)}")
    if args.x:
        if args.bins < 1:
            raise ConfigError(f"--bins must be >= 1, got {args.bins}")
        missing = [t.trial_id for t in trials if all(math.isnan(v) for v in x_values(t, args.x))]
        if missing:
            raise ConfigError(f"--x {args.x}: trials {', '.join(missing[:5])} do not log it; e.g. "
                              "time/total_env_steps or time/total_seconds")
        trials = binned(trials, args.x, args.bins)
    out = Path(args.out)
    output_dir(out, "--out", create=True)
    command = " ".join(["python benchmarks/combine_sweeps.py", *(sys.argv[1:] if argv is None else argv)])
    if args.curves_only:
        plot_curves(trials, out / "curves.png")
    elif args.archive:
        write_results_csv(trials, out / "results.csv.gz", headline_only=True)
        write_summary(trials, out / "summary.md", command)
        plot_curves(trials, out / "curves.png")
    else:
        write_outputs(trials, out, command)
    print(f"combine_sweeps trials={len(trials)} sources={len(args.sources)} out={out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
