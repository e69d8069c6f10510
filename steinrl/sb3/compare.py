"""``steinrl compare PATH ...``: evaluate trained runs side by side (steinrl's and SB3's PPO).

PATH is a run directory, a checkpoint, a logdir or a sweep's output directory (its Ray
trial directories are found under ``<out>/ray/``); every run found is scored by
:func:`steinrl.sb3.evaluation.evaluate_record` (SB3's ``evaluate_policy``, deterministic,
10 episodes, the same seed for every run). Writes ``comparison.csv`` (one row per run and
policy: return mean and std, total env steps, wall-clock seconds, ...) and
``comparison.md`` (per task, algorithm, grid point and policy: seeds, the mean of the
runs' evaluation returns with its 95 % confidence interval, env steps and seconds).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from steinrl.errors import ConfigError
from steinrl.run.cli_base import Parser
from steinrl.run.sweep_report import mean_ci
from steinrl.sb3.evaluation import ENSEMBLE_MODES, RunRecord, evaluate_record, find_runs

__all__ = ["compare_main", "compare_runs", "summary_table"]

COLUMNS = ["env", "algo", "params", "seed", "policy", "eval_mean", "eval_std", "episodes", "total_env_steps",
           "wall_s", "iterations", "finished", "particle", "selection_env_steps", "run"]


def _trial(record: RunRecord) -> dict[str, Any]:
    """A sweep trial's description from Ray's ``params.json`` (empty for a plain run directory)."""
    path = record.path / "params.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, OSError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("trial", {}), dict):
        return {}  # not what steinrl sweep writes: the run is scored without its sweep values
    return data


def _params(trial: dict[str, Any]) -> dict[str, Any]:
    """A sweep trial's grid / search values."""
    return {**(trial.get("trial", {}).get("params") or {}), **(trial.get("search") or {})}


def _label(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


def _name_differing_overrides(rows: list[dict[str, Any]], overrides: list[dict[str, Any]]) -> None:
    """Add to each row's ``params`` the spec ``config`` values (a trial's overrides) that differ
    between the compared trials of its env and algo (a key a trial lacks reads ``default``), so
    that two sweeps of one algorithm with different settings are told apart, not pooled."""
    by_task: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        by_task.setdefault((row["env"], row["algo"]), []).append(i)
    for members in by_task.values():
        keys = sorted({k for i in members for k in overrides[i]})
        differing = [k for k in keys if len({repr(overrides[i].get(k, "default")) for i in members}) > 1]
        for i in members:
            extra = _label({k: overrides[i].get(k, "default") for k in differing})
            rows[i]["params"] = " ".join(part for part in (rows[i]["params"], extra) if part)


def compare_runs(paths: Sequence[str | Path], **options: Any) -> list[dict[str, Any]]:
    """The evaluation rows of every run under ``paths`` (``options``: of :func:`evaluate_record`).

    ``params`` names a sweep trial's grid / search values and the spec ``config`` values that
    differ between the compared trials of the same env and algo."""
    records = find_runs(list(paths))
    if not records:
        raise ConfigError("no trained runs (a checkpoint.pt, or a Ray trial's checkpoint) under "
                          f"{', '.join(map(str, paths))}")
    rows, overrides = [], []
    for i, record in enumerate(records, 1):
        print(f"[{i}/{len(records)}] {record.path}", file=sys.stderr, flush=True)
        trial = _trial(record)
        params, config = _params(trial), trial.get("trial", {}).get("overrides") or {}
        config = config if isinstance(config, dict) else {}
        for row in evaluate_record(record, **options):
            rows.append({**row, "params": _label(params)})
            overrides.append({k: v for k, v in config.items() if k not in params})
    _name_differing_overrides(rows, overrides)
    return rows


def summary_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per env, algo, grid point and policy, the seeds (and how many of them are sweep
    trials that have not reached their stopping rule yet), the mean evaluation return (95 % CI),
    total env steps and wall-clock seconds (means over the seeds)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["env"], row["algo"], row["params"], row["policy"]), []).append(row)
    lines = ["| env | algo | params | policy | seeds | eval return (95 % CI) | env steps | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for (env, algo, params, policy), group in groups.items():
        mean, half = mean_ci([r["eval_mean"] for r in group])
        ci = f"{mean:.1f}" + ("" if math.isnan(half) else f" ± {half:.1f}")
        steps = sum(r["total_env_steps"] for r in group) / len(group)
        wall = sum(r["wall_s"] for r in group) / len(group)
        unfinished = sum(r.get("finished") is False for r in group)  # a sweep trial still running
        seeds = f"{len(group)}" + (f" ({unfinished} unfinished)" if unfinished else "")
        lines.append(f"| {env} | {algo} | {params} | {policy} | {seeds} | {ci} | {steps:.0f} | {wall:.1f} |")
    return "\n".join(lines)


def _write(rows: list[dict[str, Any]], out: Path, command: str) -> Path:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS, restval="", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        md = out.with_suffix(".md")
        md.write_text(f"# Side-by-side evaluation\n\n`{command}`\n\n{summary_table(rows)}\n")
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror}") from None
    return md


def compare_parser(prog: str = "steinrl compare") -> Parser:
    p = Parser(prog=prog, description="Evaluate trained runs side by side (steinrl's and SB3's) with SB3's "
                                      "evaluate_policy; writes comparison.csv and comparison.md.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="run directory, checkpoint, logdir or sweep output")
    p.add_argument("--episodes", type=int, default=10, help="evaluation episodes per policy (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes (the same for every run)")
    p.add_argument("--ensemble", default="select", choices=ENSEMBLE_MODES,
                   help="how a steinrl ensemble acts as one policy: select (the best particle of a short held-out "
                        "evaluation), sample (a random particle per episode) or mean (the mean action)")
    p.add_argument("--heldout-episodes", type=int, default=3, help="select: episodes per particle (default 3)")
    p.add_argument("--heldout-seed", type=int, help="select: seed of the held-out episodes (default seed + 1000)")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--out", metavar="FILE.csv", help="the table (default: PATH/comparison.csv for a single "
                                                     "directory PATH); comparison.md is written beside it")
    return p


def compare_main(argv: Sequence[str] | None = None, prog: str = "steinrl compare") -> int:
    from steinrl.run.trainer import check_device

    args = compare_parser(prog).parse_args(argv)
    for flag, value, low in (("--episodes", args.episodes, 1), ("--heldout-episodes", args.heldout_episodes, 1),
                             ("--seed", args.seed, 0), ("--heldout-seed", args.heldout_seed, 0)):
        if value is not None and not low <= value < 2**31:
            raise ConfigError(f"{flag} must be in [{low}, 2**31), got {value}")
    check_device(args.device)
    for path in args.paths:
        if not Path(path).exists():
            raise ConfigError(f"{path}: no run, checkpoint or folder there (give a run directory, a checkpoint.pt, a "
                              "logdir or a sweep's output directory)")
    if args.out is None and not (len(args.paths) == 1 and Path(args.paths[0]).is_dir()):
        raise ConfigError("give --out FILE.csv (the default, PATH/comparison.csv, needs a single directory PATH)")
    out = Path(args.out) if args.out else Path(args.paths[0]) / "comparison.csv"
    if out.suffix != ".csv" or out.is_dir():
        raise ConfigError(f"--out {out}: give a file name ending in .csv")
    rows = compare_runs(args.paths, episodes=args.episodes, seed=args.seed, ensemble=args.ensemble,
                        heldout_episodes=args.heldout_episodes, heldout_seed=args.heldout_seed,
                        deterministic=not args.stochastic, device=args.device)
    command = " ".join([prog, *(sys.argv[1:] if argv is None else argv)])
    md = _write(rows, out, command)
    print(summary_table(rows))
    print(f"wrote {out} and {md}", file=sys.stderr)
    return 0
