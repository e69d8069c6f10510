"""The best checkpoint: the policy of the iteration that scored best on a periodic held-out evaluation.

A run's training return peaks and may collapse after; the final weights are then not the
policy the run found (SB3's ``EvalCallback`` keeps a ``best_model`` for the same reason).
Every ``run.best_every`` iterations :class:`BestCheckpointCallback` scores the policy on
held-out episodes (:func:`heldout_score`: every particle plays ``run.best_episodes``
deterministic episodes on env seeds ``seed + 1000`` on, the episodes ``steinrl compare``'s
held-out pick uses, apart from the evaluation episodes of ``steinrl evaluate`` and
``steinrl compare``, which start at seed 0; the score is the best particle's mean return) —
never the training return. When the score beats the best so far, the run directory gets

* ``best.pt``: a checkpoint of that iteration (the same format as ``checkpoint.pt``, written
  atomically), scored by ``steinrl evaluate RUN --checkpoint best`` or ``steinrl compare
  RUN --checkpoint best``;
* ``best.json``: ``{"score", "iteration", "particle", "episodes", "seed"}`` (iteration counted
  from 1, as in the progress line: the policy after that many iterations).

The best score so far is part of the run's checkpoint (:attr:`Trainer.loop_state`), so a
resumed run's best covers the whole run. The evaluation runs on its own envs and generators
and leaves the training's random streams as they were: a run's metrics are the same with and
without it. Jobs without a particle ensemble to act with (bandits, SB3's PPO) keep no best
checkpoint; nor do sweeps (each Ray trial keeps its own checkpoints).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from steinrl.run.checkpoint import write_atomic

__all__ = ["BEST_NAME", "BEST_JSON", "HELDOUT_SEED_OFFSET", "BestCheckpointCallback",
           "best_checkpoint_of", "heldout_score", "read_best"]

BEST_NAME = "best.pt"
BEST_JSON = "best.json"
#: The held-out episodes' env seeds start at the run's seed plus this (``steinrl compare``'s held-out pick's).
HELDOUT_SEED_OFFSET = 1000


@contextlib.contextmanager
def _rng_untouched(device: torch.device) -> Iterator[None]:
    """Restore torch's (CPU and ``device``'s), NumPy's and Python's global random states on exit."""
    devices = [device] if device.type == "cuda" else []
    np_state, py_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=devices, device_type=device.type if devices else "cuda"):
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


def heldout_score(trainer: Any, seed_index: int = 0, episodes: int = 5) -> tuple[float, int] | None:
    """``(score, particle)`` of seed ``seed_index``'s current policy on held-out episodes: each
    particle's mean return over ``episodes`` deterministic episodes on env seeds from
    ``seed + HELDOUT_SEED_OFFSET``, the best particle's; None for a job without a particle
    ensemble to act with."""
    from steinrl.rl.evaluation import run_episodes
    from steinrl.rl.policy import EnsemblePolicy

    cfg = trainer.seed_configs[seed_index]
    device = torch.device(cfg.device)
    with _rng_untouched(device), torch.no_grad():
        policy = trainer.algorithm.job.load_policy(cfg, trainer.job.state_dict(seed_index), cfg.device)
        if not isinstance(policy, EnsemblePolicy):
            return None
        result = run_episodes(cfg, policy, episodes, mode="per-particle", deterministic=True,
                              seed=cfg.seed + HELDOUT_SEED_OFFSET)
    means = [float(np.mean(r)) if len(r) else -math.inf for r in result["returns"]]
    particle = int(np.argmax(means))
    return means[particle], particle


def read_best(run_dir: str | Path) -> dict[str, Any] | None:
    """A run directory's ``best.json`` (score, iteration, particle, ...), or None without one."""
    path = Path(run_dir) / BEST_JSON
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


class BestCheckpointCallback:
    """Keeps ``best.pt`` and ``best.json`` in ``run_dir`` (see the module docstring).

    Place it before the :class:`~steinrl.run.loop.CheckpointCallback` of its seed: an iteration's
    evaluation then enters the checkpoint written after it (a resume never redoes it).
    """

    def __init__(self, run_dir: Path, every: int, episodes: int, seed_index: int = 0) -> None:
        self.run_dir, self.every, self.episodes, self.seed_index = Path(run_dir), every, episodes, seed_index
        self.best: dict[str, Any] | None = None
        self.enabled = every > 0

    def on_start(self, trainer: Any) -> None:
        best = trainer.loop_state[self.seed_index].get("best")  # a resumed run's best so far
        self.best = dict(best) if isinstance(best, dict) else None

    def on_iteration(self, trainer: Any, scalars: dict[str, float]) -> None:
        if not self.enabled or trainer.iteration % self.every:
            return
        scored = heldout_score(trainer, self.seed_index, self.episodes)
        if scored is None:  # nothing to act with: no best checkpoint for this job
            self.enabled = False
            return
        score, particle = scored
        if self.best is not None and not score > self.best["score"]:
            return
        cfg = trainer.seed_configs[self.seed_index]
        self.best = {"score": score, "iteration": trainer.iteration, "particle": particle,
                     "episodes": self.episodes, "seed": cfg.seed + HELDOUT_SEED_OFFSET}
        trainer.loop_state[self.seed_index]["best"] = dict(self.best)
        trainer.save(self.run_dir / BEST_NAME, self.seed_index)
        write_atomic(self.run_dir / BEST_JSON, json.dumps(self.best, indent=2) + "\n")

    def on_end(self, trainer: Any, status: str) -> None:
        pass


def best_checkpoint_of(run: str | Path) -> Path:
    """The ``best.pt`` of run directory ``run``; a one-line :class:`ConfigError` where there is none."""
    from steinrl.errors import ConfigError

    path = Path(run)
    if path.is_file():
        raise ConfigError(f"--checkpoint best takes run directories; {run} is a file (to score it, give it "
                          "without --checkpoint)")
    if not (path / BEST_NAME).is_file():
        raise ConfigError(f"{run} has no {BEST_NAME}: a run keeps one from its first held-out evaluation, at "
                          "iteration run.best_every (not with run.best_every=0, bandits, SB3's PPO or sweeps)")
    return path / BEST_NAME
