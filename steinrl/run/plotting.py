"""Learning curves of saved runs (like the S²VGD paper's figure 4): mean ± std across seeds.

Runs are read from their ``config.yaml`` and ``metrics.jsonl``, grouped by (env, algo),
each seed counted once, and aligned on the iteration. Curves of unequal length are drawn
to the longest with the seeds each iteration has, and a warning says so.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from steinrl.errors import ConfigError
from steinrl.run.config import read_run_config
from steinrl.run.logger import read_metrics

__all__ = ["find_runs", "collect_curves", "plot_runs"]


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Run directories (holding ``config.yaml``) at or below each path, each once."""
    runs: dict[Path, Path] = {}
    for p in map(Path, paths):
        if not p.exists():
            raise ConfigError(f"no such run directory: {p}")
        if (p / "config.yaml").is_file():
            found = [p]
        else:  # os.walk follows symlinked run directories (Path.rglob does not before 3.13)
            found = sorted(Path(d) for d, _, files in os.walk(p, followlinks=True) if "config.yaml" in files)
        for run in found:
            runs.setdefault(run.resolve(), run)
    if not runs:
        raise ConfigError(f"no run directories (with config.yaml) under {', '.join(map(str, paths))}")
    return list(runs.values())


Curves = dict[tuple[str, str], dict[int, dict[int, float]]]


def collect_curves(paths: list[str | Path], key: str | None) -> tuple[Curves, dict[tuple[str, str], tuple[str, str]]]:
    """``(env, algo) -> seed -> {x: value}`` of ``key`` (None: each run's headline metric; x
    the iteration, or the rounds for bandits), and ``(env, algo) -> (x name, key)``. A seed
    seen in two run directories keeps the longer curve (with a warning)."""
    from steinrl.run.algos import parse_algo

    groups: Curves = defaultdict(dict)
    labels: dict[tuple[str, str], tuple[str, str]] = {}
    for run in find_runs(paths):
        cfg = read_run_config(run / "config.yaml")
        job = parse_algo(cfg.algo).job
        run_key = key or job.headline_metric
        x_key = getattr(job, "x_metric", None) or "iteration"  # bandits: rounds played
        curve = {int(r[x_key]): float(r[run_key]) for r in read_metrics(run)
                 if isinstance(r.get(run_key), (int, float))}
        labels[(cfg.env, cfg.algo)] = (x_key.split("/")[-1], run_key)
        if not curve:
            print(f"warning: {run} has no {run_key!r} values; skipped", file=sys.stderr)
            continue
        seeds = groups[(cfg.env, cfg.algo)]
        if cfg.seed in seeds:
            print(f"warning: seed {cfg.seed} of {cfg.algo} on {cfg.env} appears in more than one run directory; "
                  "counting it once (the longer curve)", file=sys.stderr)
            if len(seeds[cfg.seed]) >= len(curve):
                continue
        seeds[cfg.seed] = curve
    return dict(groups), labels


def plot_runs(paths: list[str | Path], out: str | Path, key: str | None = None, title: str | None = None) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Draw mean ± std across seeds of ``key`` per (env, algo) into ``out`` (one panel per env).

    ``key`` None: each run's headline metric (RL: ``rollout/ep_rew_max_particle``, bandits:
    ``bandit/cumulative_regret``).

    :return: per (env, algo), the iterations, mean, std and number of seeds drawn.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups, labels = collect_curves(paths, key)
    if not groups:
        raise ConfigError(f"no run under {', '.join(map(str, paths))} has values of {key!r}")
    env_names = sorted({env for env, _ in groups})
    fig, axes = plt.subplots(1, len(env_names), figsize=(6.4 * len(env_names), 4.2), squeeze=False)
    drawn: dict[tuple[str, str], dict[str, list[float]]] = {}
    for (env, algo), seeds in sorted(groups.items()):
        ax = axes[0][env_names.index(env)]
        iterations = sorted(set().union(*seeds.values()))
        lengths = sorted({len(c) for c in seeds.values()})
        if len(lengths) > 1:
            print(f"warning: {algo} on {env}: curves have unequal lengths ({lengths[0]} to {lengths[-1]} iterations); "
                  "each iteration is averaged over the seeds that reached it", file=sys.stderr)
        values = [[c[i] for c in seeds.values() if i in c] for i in iterations]
        mean = np.array([np.mean(v) for v in values])
        std = np.array([np.std(v) for v in values])
        n = [len(v) for v in values]
        ax.plot(iterations, mean, label=f"{algo} (n={len(seeds)})")
        ax.fill_between(iterations, mean - std, mean + std, alpha=0.25)
        drawn[(env, algo)] = {"iteration": iterations, "mean": mean.tolist(), "std": std.tolist(), "n": n}
    for ax, env in zip(axes[0], env_names):
        x_name, y_name = next(v for (e, _), v in labels.items() if e == env)
        ax.set_xlabel(x_name)
        ax.set_ylabel(y_name)
        ax.set_title(title or env)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return drawn
