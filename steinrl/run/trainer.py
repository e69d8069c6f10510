"""The Trainer: one algorithm's job, stepped one iteration at a time, saved and restored.

Built without files or directories; its one effect on the process is torch's intra-op
thread count, set to ``run.threads`` (default 1: the ops are small, and more threads only
oversubscribe a busy machine), so that every entry point runs at the same speed. The CLI,
Ray Tune's Trainable, :class:`steinrl.sb3.SVPG` and scripts all drive it the same way::

    import steinrl
    cfg = steinrl.load_config(algo="svgd-a2c", env="Cartpole", overrides={"iterations": 3})
    trainer = steinrl.Trainer(cfg)
    while not trainer.done:
        metrics = trainer.step()          # {"rollout/ep_rew_mean": ..., "train/...": ...}
    trainer.save("checkpoint.pt")         # atomic; read back without unpickling objects
    again = steinrl.Trainer(cfg)
    again.restore("checkpoint.pt")        # continues exactly as the original would

Reproducible: the same config gives the same metrics, and step, save, restore into a
fresh Trainer, step again gives what stepping on would have given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import steinrl
from steinrl.errors import ConfigError
from steinrl.run.algos import parse_algo
from steinrl.run.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from steinrl.run.config import Config, resolve_saved
from steinrl.run.legacy import migrate_job_state

__all__ = ["Trainer", "check_device", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "steinrl.trainer"
CHECKPOINT_VERSION = 2
#: Config keys that may differ between a checkpoint and the Trainer restoring it.
_FREE_KEYS = ("iterations", "rounds", "total_steps", "max_seconds", "device", "run")


def check_device(device: str) -> None:
    """Raise :class:`ConfigError` for a device that is malformed or not available here (a CUDA
    index must name one of this machine's ``torch.cuda.device_count()`` devices)."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device must be a torch device such as cpu or cuda, got {device!r}") from None
    count = torch.cuda.device_count() if dev.type == "cuda" and torch.cuda.is_available() else 0
    if dev.type == "cuda" and not count:
        raise ConfigError(f"device {device!r} requested but CUDA is not available here; use --device cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= count:
        raise ConfigError(f"device {device!r} requested but this machine has {count} CUDA device(s); use "
                          f"{'cuda:0' if count == 1 else f'cuda:0 to cuda:{count - 1}'}, cuda or cpu")
    if dev.type == "mps" and not (torch.backends.mps.is_built() and torch.backends.mps.is_available()):
        raise ConfigError(f"device {device!r} requested but MPS is not available here; use --device cpu")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device {device!r} is not supported; use cpu or cuda")


class Trainer:
    """Runs ``config.algo`` on ``config.env``: :meth:`step` is one iteration.

    :param config: a resolved config (:func:`steinrl.load_config`).
    :param seeds: several seeds trained as one batch (RL; each seed is the run it would be
        alone with the batch's config, to float rounding: the torch envs, ``rollout.env_backend``
        torch, which a single seed on the CPU does not use by default); default ``[config.seed]``.
        Everything per seed (scalars, checkpoints, configs) is indexed by the seed's position in ``seeds``.
    """

    def __init__(self, config: Config, seeds: list[int] | None = None) -> None:
        if not isinstance(config, Config):
            raise TypeError(f"Trainer takes a steinrl Config (steinrl.load_config(...)), got {type(config).__name__}")
        check_device(config.device)
        self.algorithm = parse_algo(config.algo)
        self.seeds = [config.seed] if seeds is None else [int(s) for s in seeds]
        if len(self.seeds) > 1:  # what the batch needs, pinned in every seed's config (each resumes alone)
            config = self.algorithm.job.batch_config(config, self.seeds)
        self.config = config
        threads = config.run.threads if "run" in config else 0
        if threads > 0 and torch.get_num_threads() != threads:  # 0: leave torch's (or the caller's) setting
            torch.set_num_threads(threads)
        #: each seed's own config (its ``seed``): what its checkpoint records
        self.seed_configs = [config.replace({"seed": s}) for s in self.seeds] if seeds is not None else [config]
        self.iteration = 0  #: iterations done
        #: per seed, what the run loop keeps across a resume (plain data: the best held-out score so far)
        self.loop_state: list[dict[str, Any]] = [{} for _ in self.seeds]
        self.job = self.algorithm.job(config, self.seeds)

    @property
    def done(self) -> bool:
        """True once the job's stopping rule holds (RL: ``iterations``, or ``total_steps`` env
        steps, or ``max_seconds``; bandits: the rounds' refit blocks)."""
        return self.job.done(self.iteration)

    def step_seeds(self, hooks: Any = None) -> list[dict[str, float]] | None:
        """Run one iteration of every seed; returns each seed's scalar metrics (in ``seeds`` order).

        :param hooks: job-specific hooks (RL: :class:`steinrl.rl.job.RolloutHooks`); if one
            vetoes the update, nothing changes and None is returned.
        """
        scalars = self.job.step(self.iteration, hooks)
        if scalars is not None:
            self.iteration += 1
        return scalars

    def step(self, hooks: Any = None) -> dict[str, float] | None:
        """Run one iteration of a single-seed run; returns its scalar metrics (see :meth:`step_seeds`)."""
        if len(self.seeds) != 1:
            raise TypeError(f"this Trainer runs {len(self.seeds)} seeds: step_seeds() returns each seed's scalars")
        scalars = self.step_seeds(hooks)
        return None if scalars is None else scalars[0]

    # --- state --------------------------------------------------------------------
    def state_dict(self, seed_index: int = 0) -> dict[str, Any]:
        """Everything seed ``seed_index`` needs to continue, alone or in a batch: iteration,
        its config, the job's state (plain data and tensors) and the run loop's (:attr:`loop_state`)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "steinrl_version": steinrl.__version__,
            "iteration": self.iteration,
            "config": self.seed_configs[seed_index].to_dict(),
            "job": self.job.state_dict(seed_index),
            "loop": dict(self.loop_state[seed_index]),
        }

    def _check(self, state: Any, seed_index: int, where: str) -> dict[str, Any]:
        """The job state of checkpoint ``state`` if it fits seed ``seed_index`` of this run."""
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{where} is not a steinrl checkpoint (written by steinrl >= 0.2)")
        if state.get("format_version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"{where} has checkpoint format {state.get('format_version')!r}; this steinrl "
                                  f"({steinrl.__version__}) reads format {CHECKPOINT_VERSION}")
        saved = resolve_saved(state["config"], where).to_dict()
        mine = self.seed_configs[seed_index].to_dict()
        differ = sorted(k for k in set(saved) | set(mine) if k not in _FREE_KEYS and saved.get(k) != mine.get(k))
        if differ:
            raise CheckpointError(f"{where} was written with a different config ({', '.join(differ)} differ)")
        return migrate_job_state(state["job"])

    def load_state_dict(self, states: dict[str, Any] | list[dict[str, Any]], where: str = "the checkpoint") -> None:
        """Continue from one :meth:`state_dict` per seed (a single dict: a single-seed run); each
        config must match this run's (that seed's) except for ``iterations``, ``device`` and
        the ``run`` section, and every seed must be at the same iteration."""
        states = [states] if isinstance(states, dict) else list(states)
        if len(states) != len(self.seeds):
            raise CheckpointError(f"{len(self.seeds)} seed(s) need as many checkpoints, got {len(states)}")
        jobs = [self._check(state, i, where) for i, state in enumerate(states)]
        iterations = {int(state["iteration"]) for state in states}
        if len(iterations) != 1:
            raise CheckpointError(f"the seeds' checkpoints are at different iterations {sorted(iterations)}")
        try:
            self.job.load_state_dict(jobs)
        except (KeyError, RuntimeError, ValueError, TypeError) as exc:
            raise CheckpointError(f"{where} does not fit this run: {' '.join(str(exc).split())[:300]}") from None
        self.iteration = iterations.pop()
        self.loop_state = [dict(state.get("loop") or {}) for state in states]

    def save(self, path: str | Path, seed_index: int = 0) -> None:
        """Atomically write seed ``seed_index``'s :meth:`state_dict` to ``path``."""
        save_checkpoint(self.state_dict(seed_index), path)

    def restore(self, path: str | Path | list[str | Path]) -> Trainer:
        """Load the checkpoint(s) written by :meth:`save` (one per seed; without unpickling
        objects) and return this trainer: ``t = steinrl.Trainer(cfg).restore(path)``."""
        paths = [path] if isinstance(path, (str, Path)) else list(path)
        # Read to the CPU: each part moves what belongs on the device itself (parameters and
        # optimizer moments into its own tensors; generator states stay the CPU byte tensors
        # torch.Generator.set_state needs; Adam's step count stays a CPU scalar).
        states = [load_checkpoint(p, map_location="cpu") for p in paths]
        self.load_state_dict(states, ", ".join(str(p) for p in paths))
        return self

    def close(self) -> None:
        """Release the job's resources (env processes)."""
        self.job.close()
