"""What ``steinrl compare`` tells its reader beside the table: what each column means (under the
table in the terminal and in ``comparison.md``; docs/usage.md and docs/sb3.md say the same), which
earlier table it replaces, and each run's settings (what tells two runs' rows apart)."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["column_notes", "replaced_table", "run_settings"]


def run_settings(record: Any) -> dict[str, Any]:
    """A :class:`~steinrl.run.compare_eval.RunRecord`'s resolved config (its ``config.yaml``, else its
    checkpoint's) less its seed, length, device and ``run`` section
    (:func:`steinrl.run.plotting.config_identity`): two runs that differ here are not pooled."""
    from steinrl.run.checkpoint import load_checkpoint
    from steinrl.run.config import read_run_config, resolve_saved
    from steinrl.run.plotting import config_identity

    saved = record.path / "config.yaml"
    if saved.is_file():
        return config_identity(read_run_config(saved))
    return config_identity(resolve_saved(load_checkpoint(record.checkpoint)["config"], str(record.checkpoint)))


def column_notes(moved: float) -> list[str]:
    """One line per column of :func:`steinrl.run.compare.summary_table` (``moved``: its metres)."""
    return [
        "Columns:",
        "- policy: `best-train` is the run's particle with the best training return (its last iteration with "
        "episodes); `ensemble-select` the particle best on a short held-out evaluation (--heldout-episodes per "
        "particle, seed --heldout-seed); `ensemble-sample` a random particle each episode; `ensemble-mean` the "
        "particles' mean action; `sb3` an SB3 run's policy. Each is scored alone.",
        "- params: the settings in which this row's runs differ from the task's other rows of the algo; seeds: the "
        "runs pooled in the row.",
        "- eval return: the mean over the runs of each run's mean return over --episodes episodes (deterministic "
        "actions unless --stochastic), with a 95 % Student t interval.",
        "- better SB3 PPO: the higher seed mean of the task's `sb3-ppo` (SB3's defaults) and `sb3-ppo-zoo` "
        "(rl-zoo3's tuned values) rows, naming which: the bar a Stein row has to pass.",
        f"- moved ≥ {moved:g} m: the runs whose mean forward distance (torso x displacement) is at least "
        f"{moved:g} m; reward threshold: the runs whose eval return reaches the task's Gymnasium "
        "reward_threshold, `k/n ≥ T` (– where the task has none).",
        "- env steps, wall s: training's env steps and seconds, means over the runs.",
    ]


def replaced_table(out: Path) -> str | None:
    """What an earlier table at ``out`` (``comparison.csv``, with its ``.md``) held, for the line
    that says it is replaced; None where there is none."""
    md = out.with_suffix(".md")
    if not out.is_file() and not md.is_file():
        return None
    parts = " and ".join(str(p) for p in (out, md) if p.is_file())
    try:
        with open(out, newline="") as f:
            rows = f"{sum(1 for _ in csv.DictReader(f))} rows, "
    except (OSError, UnicodeDecodeError, csv.Error):
        rows = ""
    when = datetime.fromtimestamp(max(p.stat().st_mtime for p in (out, md) if p.is_file()))
    return f"replaced {parts} ({rows}written {when:%Y-%m-%d %H:%M})"
