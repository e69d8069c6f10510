"""Learning curves from TensorBoard event files (like the S²VGD paper's figure 4)."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import numpy as np

from steinrl.run.config import ConfigError, read_run_config


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Run directories (holding ``config.yaml``) at or below each path."""
    runs: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such run directory: {p}")
        if (p / "config.yaml").is_file():
            runs.append(p)
        else:
            # os.walk follows symlinked run directories (Path.rglob does not before 3.13)
            runs.extend(sorted(Path(d) for d, _, files in os.walk(p, followlinks=True) if "config.yaml" in files))
    if not runs:
        raise FileNotFoundError(f"no run directories (with config.yaml) under {', '.join(map(str, paths))}")
    return runs


def read_scalar(run_dir: str | Path, key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of scalar ``key`` in a run's TensorBoard event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    if key not in acc.Tags().get("scalars", []):
        raise ConfigError(f"run {run_dir} has no scalar {key!r}; it has: {', '.join(sorted(acc.Tags()['scalars']))}")
    events = acc.Scalars(key)
    return np.array([e.step for e in events]), np.array([e.value for e in events])


def plot_runs(paths: list[str | Path], out: str | Path, key: str = "rollout/ep_rew_max_particle",
              title: str | None = None) -> dict[str, dict[str, list[float]]]:
    """Plot mean ± std across seeds of ``key`` per algorithm (one line each) into ``out``.

    :return: per algorithm, the iterations, mean and std that were drawn.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[np.ndarray]] = defaultdict(list)
    envs_seen = set()
    for run in find_runs(paths):
        cfg = read_run_config(run / "config.yaml")
        envs_seen.add(cfg.env)
        steps, values = read_scalar(run, key)
        groups[cfg.algo].append((steps, values))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn: dict[str, dict[str, list[float]]] = {}
    for algo, curves in sorted(groups.items()):
        n = min(len(s) for s, _ in curves)
        steps = curves[0][0][:n]
        vals = np.stack([v[:n] for _, v in curves])
        mean, std = vals.mean(0), vals.std(0)
        ax.plot(steps, mean, label=f"{algo} (n={len(curves)})")
        ax.fill_between(steps, mean - std, mean + std, alpha=0.25)
        drawn[algo] = {"iteration": steps.tolist(), "mean": mean.tolist(), "std": std.tolist()}
    ax.set_xlabel("iteration")
    ax.set_ylabel(key)
    ax.set_title(title or ", ".join(sorted(envs_seen)))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return drawn
