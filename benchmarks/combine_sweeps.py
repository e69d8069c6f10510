#!/usr/bin/env python
"""Report the results of several ``steinrl sweep`` runs together (nothing is re-run).

    python benchmarks/combine_sweeps.py --out docs/study_damped \\
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
the form in which docs/study/ keeps the study behind docs/results.md, so that its tables
can be re-made, and combined, from the repository alone:

    python benchmarks/combine_sweeps.py runs/sweeps/study_exact_10seeds --archive --out docs/study/exact_10seeds
    python benchmarks/combine_sweeps.py docs/study/exact_10seeds docs/study/damped_10seeds --out /tmp/both

``--curves-only`` (re)draws only ``curves.png`` (``--out`` may be the source itself: the
figures of docs/study/ are re-drawn from their archives this way).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.errors import ConfigError  # noqa: E402
from steinrl.run.cli_base import Parser, output_dir, run_cli  # noqa: E402
from steinrl.run.sweep_report import plot_curves, read_results_csv, write_outputs, write_results_csv, write_summary  # noqa: E402


def parse_source(text: str) -> tuple[Path, dict]:
    """``DIR`` or ``DIR:key=value,key=value`` -> (results.csv path, extra grid values)."""
    directory, _, extra = text.partition(":")
    params = {}
    for item in filter(None, extra.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"source {text!r}: expected DIR or DIR:key=value[,key=value]")
        params[key] = yaml.safe_load(value)
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


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="benchmarks/combine_sweeps.py", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="+", metavar="DIR[:key=value,...]", help="sweep output directories")
    p.add_argument("--out", required=True, help="directory for the combined results.csv, summary.md, curves.png")
    p.add_argument("--archive", action="store_true",
                   help="write results.csv.gz with the headline metric only, instead of results.csv")
    p.add_argument("--curves-only", action="store_true", help="draw only curves.png (no results, no summary)")
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
