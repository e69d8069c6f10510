"""``steinrl compare PATH ...``: evaluate trained runs side by side (steinrl's and SB3's PPO).

PATH is a run directory, a checkpoint, a logdir or a sweep's output directory (its Ray
trial directories are found under ``<out>/ray/``); every run found is scored by
:func:`steinrl.run.compare_eval.evaluate_record` (SB3's ``evaluate_policy``, deterministic,
10 episodes, the same seed for every run). Writes ``comparison.csv`` (one row per run and
policy: return mean and std, episode length, forward distance, total env steps, wall-clock
seconds, ...) and ``comparison.md`` (per task, algorithm, particle count M, grid point and
policy: seeds, the mean of the runs' evaluation returns with its 95 % confidence interval,
the better of SB3's two PPOs on that task, episode length, forward distance and how many
runs moved, how many reached the task's Gymnasium ``reward_threshold``, env steps and seconds).

A PATH may also be an earlier ``comparison.csv`` (an archived study's): its rows are read back,
not re-evaluated, so that a table joins runs whose checkpoints are gone. ``PATH:key=value[,...]``
labels a source's rows (``particles=4`` gives older tables' rows their M; any other key goes into
``params``, which tells two sources of one algorithm apart instead of pooling them)::

    steinrl compare research/archives/mujoco_equal_time_anneal/comparison.csv:particles=4,kernel=weights \
        runs/sweeps/kernel_mujoco_independent --out runs/ablation/comparison.csv

The table is the kernel ablation: per task the Stein methods' rows come first, then
``independent-<estimator>`` (the same particles without a kernel), then ``sb3-ppo`` and
``sb3-ppo-zoo``; a note under it names each Stein row whose ``independent`` twin (same
estimator, same M) is missing.
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
from steinrl.run.compare_eval import ENSEMBLE_MODES, RunRecord, evaluate_record, find_runs
from steinrl.run.compare_notes import column_notes, replaced_table, run_settings
from steinrl.run.compare_table import MOVED_METRES, SB3_PPOS, reward_threshold, summary_table

__all__ = ["compare_main", "compare_runs", "reward_threshold", "summary_table"]

COLUMNS = ["env", "algo", "particles", "params", "seed", "policy", "eval_mean", "eval_std", "episodes",
           "ep_len_mean", "forward_mean", "total_env_steps", "wall_s", "iterations", "finished", "particle",
           "selection_env_steps", "run"]



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


def _name_differing_overrides(rows: list[dict[str, Any]], overrides: list[dict[str, Any]],
                              identities: list[dict[str, Any]] | None = None,
                              named: list[set[str]] | None = None) -> None:
    """Add to each row's ``params`` the spec ``config`` values (a trial's overrides) that differ between the
    compared trials of its env and algo (a key a trial lacks reads ``default``), then the resolved config
    values (``identities``) that differ and that no grid value or override (``named``) names, as ``evaluate
    --plot`` splits curves: runs of one algorithm with different settings are not pooled (kernels in short
    form, ``update.kernel=imq(β=-0.3)``)."""
    from steinrl.run.labels import short_value

    identities = identities or [{} for _ in rows]
    by_task: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        by_task.setdefault((row["env"], row["algo"]), []).append(i)
    for members in by_task.values():
        keys = sorted({k for i in members for k in overrides[i]})
        differing = [k for k in keys if len({repr(overrides[i].get(k, "default")) for i in members}) > 1]
        covered = set(keys).union(*(named[i] for i in members)) if named else set(keys)
        config = [k for k in sorted({k for i in members for k in identities[i]})
                  if k not in covered and k.rsplit(".", 1)[-1] not in covered
                  and len({repr(identities[i].get(k, "-")) for i in members}) > 1]
        for i in members:
            extra = _label({**{k: overrides[i].get(k, "default") for k in differing},
                            **{k: short_value(identities[i].get(k, "-")) for k in config}})
            rows[i]["params"] = " ".join(part for part in (rows[i]["params"], extra) if part)


def compare_runs(paths: Sequence[str | Path], labels: Sequence[dict[str, str]] | None = None,
                 checkpoint: str = "last", **options: Any) -> list[dict[str, Any]]:
    """The evaluation rows of every run under ``paths`` (``options``: of :func:`evaluate_record`;
    ``checkpoint``: of :func:`~steinrl.run.compare_eval.find_runs`, ``best`` scores each run's best.pt).

    ``params`` names a sweep trial's grid / search values and the spec ``config`` values that
    differ between the compared trials of the same env and algo; ``labels[i]`` (optional), the
    ``key=value`` labels of ``paths[i]``'s rows (:func:`label_rows`)."""
    labels = list(labels) if labels is not None else [{} for _ in paths]
    found = [(record, labels[i]) for i, path in enumerate(paths) for record in find_runs([path], checkpoint)]
    if not found:
        raise ConfigError("no trained runs (a checkpoint.pt, or a Ray trial's checkpoint) under "
                          f"{', '.join(map(str, paths))}")
    rows, overrides, row_labels, identities, named = [], [], [], [], []
    for i, (record, label) in enumerate(found, 1):
        print(f"[{i}/{len(found)}] {record.path}", file=sys.stderr, flush=True)
        trial = _trial(record)
        params, config = _params(trial), trial.get("trial", {}).get("overrides") or {}
        config = config if isinstance(config, dict) else {}
        identity = run_settings(record)
        for row in evaluate_record(record, **options):
            rows.append({**row, "params": _label(params)})
            overrides.append({k: v for k, v in config.items() if k not in params})
            row_labels.append(label)
            identities.append(identity)
            named.append(set(params))
    _name_differing_overrides(rows, overrides, identities, named)
    for row, label in zip(rows, row_labels):
        label_rows([row], label)
    return rows


def split_source(arg: str | Path) -> tuple[Path, dict[str, str]]:
    """``PATH[:key=value,...]`` as ``(PATH, values)`` (``combine_sweeps.py``'s convention): the
    values label every row of that source (see :func:`label_rows`). A PATH that exists is taken
    whole, colons and all."""
    text = str(arg)
    head, sep, tail = text.rpartition(":")
    if Path(text).exists() or not sep or not Path(head).exists():
        return Path(text), {}
    values = {}
    for item in tail.split(","):
        key, eq, value = item.partition("=")
        if not (eq and key.strip() and value.strip()):
            raise ConfigError(f"{text}: after PATH: give key=value[,key=value], got {item!r}")
        values[key.strip()] = value.strip()
    return Path(head), values


def label_rows(rows: list[dict[str, Any]], values: dict[str, str]) -> None:
    """Add a source's ``key=value`` labels to its rows: ``particles=M`` fills the M of rows that
    lack one (older tables have no such column); every other key is appended to ``params``, so
    that rows of one algorithm from two sources are told apart, not pooled."""
    for row in rows:
        if "particles" in values and row.get("particles") in ("", None):
            row["particles"] = int(values["particles"]) if values["particles"].isdigit() else values["particles"]
        extra = _label({k: v for k, v in values.items() if k != "particles"})
        row["params"] = " ".join(part for part in (row.get("params", ""), extra) if part)


#: The columns a ``comparison.csv`` must have to be read back; the others may be missing (older tables).
REQUIRED = ("env", "algo", "seed", "policy", "eval_mean", "total_env_steps", "wall_s")
NUMERIC = ("eval_mean", "eval_std", "ep_len_mean", "forward_mean", "total_env_steps", "wall_s")


def read_comparison(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an earlier ``comparison.csv``, as :func:`compare_runs` gives them, re-evaluating
    nothing: numbers as floats (a column the file lacks reads nan, an empty cell too), ``finished``
    as a bool, ``particles`` as an int (1 for SB3's PPOs where the file has no M; empty otherwise)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            fields, raw = list(reader.fieldnames or []), list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        raise ConfigError(f"{path} is not a steinrl compare table: it has no {', '.join(missing)} column "
                          f"(a comparison.csv has {', '.join(REQUIRED)}, ...)")
    rows = []
    for line, cells in enumerate(raw, 2):
        row: dict[str, Any] = {c: cells.get(c) or "" for c in COLUMNS}
        for column in NUMERIC:
            try:
                row[column] = float(row[column]) if row[column] != "" else math.nan
            except ValueError:
                raise ConfigError(f"{path} line {line}: {column} must be a number, got {row[column]!r}") from None
        row["finished"] = {"True": True, "False": False}.get(row["finished"], "")
        m = row["particles"]
        row["particles"] = int(m) if m.isdigit() else (1 if not m and row["algo"] in SB3_PPOS else m)
        rows.append(row)
    return rows


def _write(rows: list[dict[str, Any]], out: Path, command: str, moved: float = MOVED_METRES) -> Path:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS, restval="", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        md = out.with_suffix(".md")
        notes = "\n".join(column_notes(moved))
        md.write_text(f"# Side-by-side evaluation\n\n`{command}`\n\n{summary_table(rows, moved)}\n\n{notes}\n")
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror}") from None
    return md


def compare_parser(prog: str = "steinrl compare") -> Parser:
    p = Parser(prog=prog, description="Evaluate trained runs side by side (steinrl's and SB3's) with SB3's "
                                      "evaluate_policy; writes comparison.csv and comparison.md.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="run directory, checkpoint, logdir, sweep output or an earlier comparison.csv (read back, "
                        "not re-evaluated); PATH:key=value[,...] labels its rows (particles=M sets a missing M, "
                        "other keys go into params)")
    p.add_argument("--episodes", type=int, default=10, help="evaluation episodes per policy (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes (the same for every run)")
    p.add_argument("--ensemble", default="select", choices=ENSEMBLE_MODES,
                   help="how a steinrl ensemble acts as one policy: select (the best particle of a short held-out "
                        "evaluation), sample (a random particle per episode) or mean (the mean action)")
    p.add_argument("--heldout-episodes", type=int, default=3, help="select: episodes per particle (default 3)")
    p.add_argument("--heldout-seed", type=int, help="select: seed of the held-out episodes (default seed + 1000)")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    p.add_argument("--checkpoint", choices=("last", "best"), default="last",
                   help="a steinrl run directory's policy: last (checkpoint.pt) or best (best.pt, from its held-out "
                        "evaluations every run.best_every iterations, where it has one; the run column names it)")
    p.add_argument("--moved", type=float, default=MOVED_METRES, metavar="METRES",
                   help="a run moved when its mean forward distance (the torso's x displacement over an evaluation "
                        f"episode, locomotion tasks) is at least this (default {MOVED_METRES:g})")
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
    if not (math.isfinite(args.moved) and args.moved >= 0):
        raise ConfigError(f"--moved must be a finite number >= 0, got {args.moved}")
    check_device(args.device)
    sources = [split_source(path) for path in args.paths]
    for path, _ in sources:
        if not path.exists():
            raise ConfigError(f"no run, checkpoint or folder at {path} (give a run directory, a checkpoint.pt, a "
                              "logdir, a sweep's output directory or an earlier comparison.csv)")
    if args.out is None and not (len(sources) == 1 and sources[0][0].is_dir()):
        raise ConfigError("give --out FILE.csv (the default, PATH/comparison.csv, needs a single directory PATH)")
    out = Path(args.out) if args.out else sources[0][0] / "comparison.csv"
    if out.suffix != ".csv" or out.is_dir():
        raise ConfigError(f"--out {out}: give a file name ending in .csv")
    runs = [(path, values) for path, values in sources if path.suffix != ".csv"]
    rows = []
    if runs:
        rows = compare_runs([path for path, _ in runs], [values for _, values in runs], episodes=args.episodes,
                            seed=args.seed, ensemble=args.ensemble, heldout_episodes=args.heldout_episodes,
                            heldout_seed=args.heldout_seed, deterministic=not args.stochastic, device=args.device,
                            checkpoint=args.checkpoint)
    for path, values in sources:
        if path.suffix == ".csv":
            table = read_comparison(path)
            label_rows(table, values)
            rows += table
    command = " ".join([prog, *(sys.argv[1:] if argv is None else argv)])
    replaced = replaced_table(out)  # said, not silent: the earlier table is overwritten
    md = _write(rows, out, command, args.moved)
    print(summary_table(rows, args.moved), "", *column_notes(args.moved), sep="\n")
    print(*([replaced] if replaced else []), f"wrote {out} and {md}", sep="\n", file=sys.stderr)
    return 0
