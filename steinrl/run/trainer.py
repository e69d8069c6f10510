"""The Trainer: one algorithm's job, stepped one iteration at a time, saved and restored.

Built without side effects (no files, no directories, no global state): the CLI, Ray
Tune's Trainable and :class:`steinrl.sb3.SVPG` all drive it the same way::

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
from steinrl.run.config import Config, resolve

__all__ = ["Trainer", "check_device", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "steinrl.trainer"
CHECKPOINT_VERSION = 2
#: Config keys that may differ between a checkpoint and the Trainer restoring it.
_FREE_KEYS = ("iterations", "rounds", "device", "run")


def check_device(device: str) -> None:
    """Raise :class:`ConfigError` for a device that is malformed or not available here."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device must be a torch device such as cpu or cuda, got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available here; use --device cpu")
    if dev.type == "mps" and not (torch.backends.mps.is_built() and torch.backends.mps.is_available()):
        raise ConfigError(f"device {device!r} requested but MPS is not available here; use --device cpu")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device {device!r} is not supported; use cpu or cuda")


class Trainer:
    """Runs ``config.algo`` on ``config.env``: :meth:`step` is one iteration.

    :param config: a resolved config (:func:`steinrl.load_config`).
    """

    def __init__(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise TypeError(f"Trainer takes a steinrl Config (steinrl.load_config(...)), got {type(config).__name__}")
        check_device(config.device)
        self.config = config
        self.algorithm = parse_algo(config.algo)
        self.iteration = 0  #: iterations done
        self.job = self.algorithm.job(config)

    @property
    def done(self) -> bool:
        """True once the job's steps are done (RL: ``iterations``; bandits: the rounds' refit blocks)."""
        return self.iteration >= self.job.num_steps

    def step(self, hooks: Any = None) -> dict[str, float] | None:
        """Run one iteration; returns its scalar metrics.

        :param hooks: job-specific hooks (RL: :class:`steinrl.rl.job.RolloutHooks`); if one
            vetoes the update, nothing changes and None is returned.
        """
        scalars = self.job.step(self.iteration, hooks)
        if scalars is not None:
            self.iteration += 1
        return scalars

    # --- state --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue: iteration, config, the job's state (plain data and tensors)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "steinrl_version": steinrl.__version__,
            "iteration": self.iteration,
            "config": self.config.to_dict(),
            "job": self.job.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any], where: str = "the checkpoint") -> None:
        """Continue from ``state`` (:meth:`state_dict`); its config must match this one's
        except for ``iterations``, ``device`` and the ``run`` section."""
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{where} is not a steinrl checkpoint (written by steinrl >= 0.2)")
        if state.get("format_version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"{where} has checkpoint format {state.get('format_version')!r}; this steinrl "
                                  f"({steinrl.__version__}) reads format {CHECKPOINT_VERSION}")
        saved = resolve([(state["config"], where)]).to_dict()
        mine = self.config.to_dict()
        differ = sorted(k for k in set(saved) | set(mine) if k not in _FREE_KEYS and saved.get(k) != mine.get(k))
        if differ:
            raise CheckpointError(f"{where} was written with a different config ({', '.join(differ)} differ)")
        try:
            self.job.load_state_dict(state["job"])
        except (KeyError, RuntimeError, ValueError) as exc:
            raise CheckpointError(f"{where} does not fit this run: {' '.join(str(exc).split())[:300]}") from None
        self.iteration = int(state["iteration"])

    def save(self, path: str | Path) -> None:
        """Atomically write :meth:`state_dict` to ``path``."""
        save_checkpoint(self.state_dict(), path)

    def restore(self, path: str | Path) -> None:
        """Load a checkpoint written by :meth:`save` (without unpickling objects)."""
        self.load_state_dict(load_checkpoint(path, map_location=self.config.device), str(path))

    def close(self) -> None:
        """Release the job's resources (env processes)."""
        self.job.close()
