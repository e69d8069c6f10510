"""Several seeds of one RL run trained as one batch (``steinrl train --seeds 0,1,...``).

:class:`SeedBatchTrainer` steps a :class:`~steinrl.rl.seeds.SeedBatchJob` and gives each
seed a :class:`SeedView` that behaves, for the run loop's callbacks, like that seed's own
:class:`~steinrl.run.trainer.Trainer`: its config (with its seed), its iteration, its
scalars, and a checkpoint in the single-seed format (so ``steinrl train --resume`` of one
seed's run directory continues that seed alone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import steinrl
from steinrl.errors import ConfigError
from steinrl.rl.seeds import SeedBatchJob
from steinrl.run.checkpoint import save_checkpoint
from steinrl.run.config import Config
from steinrl.run.trainer import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, check_device

__all__ = ["SeedBatchTrainer", "SeedView"]


class SeedBatchTrainer:
    """Seeds ``seeds`` of ``config`` as one batch; :meth:`step` returns each seed's scalars.

    :param config: the shared config (continuing or cut sampling; any device; the torch
        backend, which the batch needs, is written into every seed's config so that its
        checkpoint resumes alone).
    :param seeds: the seeds, each with its own run.
    """

    def __init__(self, config: Config, seeds: list[int]) -> None:
        check_device(config.device)
        from steinrl.rl.job import PolicyGradientJob
        from steinrl.run.algos import parse_algo

        if parse_algo(config.algo).job is not PolicyGradientJob:
            raise ConfigError(f"--seeds batches the seeds of RL algorithms; {config.algo} is not one (run its seeds "
                              "one by one, or as a sweep)")
        config = config.replace({"rollout.env_backend": "torch"})
        self.config = config
        self.seeds = list(seeds)
        self.job = SeedBatchJob(config, self.seeds)
        self.iteration = 0
        self.views = [SeedView(self, i, config.replace({"seed": s})) for i, s in enumerate(self.seeds)]

    @property
    def done(self) -> bool:
        return self.iteration >= self.config.iterations

    def step(self) -> list[dict[str, float]]:
        scalars = self.job.step(self.iteration)
        self.iteration += 1
        return scalars

    def state_dict(self, index: int) -> dict[str, Any]:
        """Seed ``index``'s checkpoint, as its own :class:`Trainer` would write it."""
        return {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                "steinrl_version": steinrl.__version__, "iteration": self.iteration,
                "config": self.views[index].config.to_dict(), "job": self.job.state_dicts()[index]}

    def close(self) -> None:
        self.job.close()


class SeedView:
    """One seed of a :class:`SeedBatchTrainer`, shaped like a :class:`Trainer` for the run loop."""

    def __init__(self, batch: SeedBatchTrainer, index: int, config: Config) -> None:
        self.batch, self.index, self.config = batch, index, config

    #: the batch's iteration and whether it is done (all seeds step together)
    iteration = property(lambda self: self.batch.iteration)
    done = property(lambda self: self.batch.done)

    @property
    def job(self) -> Any:
        """The RL job's class attributes the callbacks read (headline metric, summary, progress fields)."""
        from steinrl.rl.job import PolicyGradientJob

        return _JobFacts(PolicyGradientJob, self.config.iterations)

    def save(self, path: str | Path) -> None:
        save_checkpoint(self.batch.state_dict(self.index), path)


class _JobFacts:
    """What a callback asks of ``trainer.job``: the job class's facts and the run's length."""

    def __init__(self, job_cls: Any, num_steps: int) -> None:
        self._cls, self.num_steps = job_cls, num_steps

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)
