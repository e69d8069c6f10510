"""The training loop, top to bottom: config -> envs -> agent -> (collect, update) -> logger.

Used by ``train.py`` and by the Stable-Baselines3-style :class:`steinrl.sb3.SVPG`.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Callable

import gymnasium
import numpy as np
import torch

import steinrl.envs as envs
import steinrl
from steinrl.rl.agent import Agent, NonFiniteError
from steinrl.run.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from steinrl.run.config import Config, ConfigError, save_config
from steinrl.run.logger import RunLogger
from steinrl.rl.rollout import Batch, Sampler

CONFIG_NAME = "config.yaml"

#: Called after every iteration with ``(iteration, scalars)``; returning False stops training.
IterationCallback = Callable[[int, dict], bool]
#: Called just before an iteration's rollout with the iteration.
RolloutStartCallback = Callable[[int], None]
#: Called just after an iteration's rollout with ``(iteration, batch)``; returning False
#: stops training before that iteration's update (the checkpoint keeps the iteration undone).
RolloutEndCallback = Callable[[int, Batch], bool]


class TrainingInterrupted(Exception):
    """Ctrl-C during training; the checkpoint of the last finished iteration was saved."""


def run_dir_for(cfg: Config) -> Path:
    """``<logdir>/<env>/<algo>/<run_name>`` (``/`` in env ids becomes ``_``)."""
    name = cfg.run_name or f"seed{cfg.seed}-{datetime.now():%Y%m%d-%H%M%S}"
    return Path(cfg.logdir) / cfg.env.replace("/", "_") / cfg.algo / name


def make_envs(cfg: Config) -> gymnasium.vector.VectorEnv:
    """All ``M * E`` envs of a run as one vector env."""
    mode = None if envs.is_steinrl_env(cfg.env) else cfg.vectorization
    return envs.make_vec(cfg.env, cfg.particles * cfg.envs_per_particle, vectorization_mode=mode,
                         max_episode_steps=cfg.horizon)


def check_device(device: str) -> None:
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device must be a torch device such as cpu or cuda, got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available here; use --device cpu")


def episode_scalars(batch: Batch) -> dict[str, float]:
    """Rollout scalars: SB3's ``ep_rew_mean`` / ``ep_len_mean`` and the papers' max-over-particles."""
    per_particle = [float(r.mean()) if len(r) else float("nan") for r in batch.episode_returns]
    all_returns = np.concatenate(batch.episode_returns)
    all_lengths = np.concatenate(batch.episode_lengths)
    scalars = {
        "rollout/ep_rew_mean": float(all_returns.mean()) if len(all_returns) else float("nan"),
        "rollout/ep_len_mean": float(all_lengths.mean()) if len(all_lengths) else float("nan"),
        "rollout/ep_rew_max_particle": float(np.nanmax(per_particle)) if len(all_returns) else float("nan"),
        "rollout/episodes": float(len(all_returns)),
    }
    for i, value in enumerate(per_particle):
        scalars[f"particles/ep_rew_mean_{i:02d}"] = value
    return scalars


class _DeferredInterrupt:
    """First Ctrl-C asks the loop to stop after the current iteration (and save);
    a second one interrupts at once. Only active in the main thread."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nCtrl-C: finishing this iteration, saving a checkpoint and stopping "
              "(press Ctrl-C again to abort at once)", file=sys.stderr)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


class Trainer:
    """Owns a run directory and trains an :class:`Agent` in it.

    :param cfg: the resolved config (ignored when resuming: the run's own config is used).
    :param resume: a run directory to continue from its checkpoint.
    :param iterations: when resuming, a new total number of iterations (optional).
    """

    def __init__(self, cfg: Config | None, resume: str | Path | None = None, iterations: int | None = None):
        self.start_iteration = 0
        state = None
        if resume is not None:
            from steinrl.run.config import read_run_config

            self.run_dir = Path(resume)
            if not (self.run_dir / CONFIG_NAME).is_file():
                raise ConfigError(f"cannot resume: {self.run_dir} has no {CONFIG_NAME}")
            cfg = read_run_config(self.run_dir / CONFIG_NAME)
            if iterations is not None:
                cfg.iterations = iterations
            check_device(cfg.device)
            if (self.run_dir / CHECKPOINT_NAME).is_file():
                state = load_checkpoint(self.run_dir, map_location=cfg.device)
                self.start_iteration = int(state["iteration"])
        else:
            check_device(cfg.device)
            self.run_dir = run_dir_for(cfg)
            if (self.run_dir / CHECKPOINT_NAME).exists():
                raise ConfigError(f"run directory {self.run_dir} already holds a run; resume it with "
                                  f"--resume {self.run_dir} or choose another --run-name")
        self.cfg = cfg
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.envs = make_envs(cfg)
        self.sampler = Sampler(self.envs, cfg.particles, cfg.envs_per_particle, cfg.horizon)
        self.agent = Agent(cfg, self.envs.single_observation_space, self.envs.single_action_space)
        if state is not None:
            self.agent.load_state_dict(state["agent"])
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, self.run_dir / CONFIG_NAME, extra={
            "steinrl_version": steinrl.__version__, "torch_version": str(torch.__version__),
            "gymnasium_version": gymnasium.__version__, "python": sys.version.split()[0],
            "command": " ".join(sys.argv),
        })

    def checkpoint(self, next_iteration: int) -> None:
        """Atomically save everything needed to continue at ``next_iteration``."""
        save_checkpoint({
            "iteration": next_iteration,
            "agent": self.agent.state_dict(),
            "config": asdict(self.cfg),
            "steinrl_version": steinrl.__version__,
        }, self.run_dir / CHECKPOINT_NAME)

    def train(self, callback: IterationCallback | None = None, *,
              on_rollout_start: RolloutStartCallback | None = None,
              on_rollout_end: RolloutEndCallback | None = None) -> Path:
        """Run iterations ``start_iteration .. cfg.iterations - 1``; returns the run directory.

        The hooks (used by :class:`steinrl.sb3.SVPG`) see every iteration: ``callback``
        after it, ``on_rollout_start`` / ``on_rollout_end`` around its rollout.

        Raises :class:`TrainingInterrupted` on Ctrl-C (after saving) and
        :class:`~steinrl.rl.agent.NonFiniteError` on NaN/inf (keeping the last good checkpoint).
        """
        cfg, agent = self.cfg, self.agent
        logger = RunLogger(self.run_dir, self.start_iteration, cfg.tensorboard)
        if self.start_iteration == 0:
            logger.log_hparams(cfg.to_dict(), {"rollout/ep_rew_max_particle": float("nan")})
        progress = None
        if cfg.progress:
            from tqdm.auto import tqdm

            progress = tqdm(total=cfg.iterations, initial=self.start_iteration, unit="it",
                            desc=f"{cfg.algo} {cfg.env}", dynamic_ncols=True)
        iteration = self.start_iteration
        with _DeferredInterrupt() as interrupt:
            try:
                for iteration in range(self.start_iteration, cfg.iterations):
                    if on_rollout_start is not None:
                        on_rollout_start(iteration)
                    t0 = time.perf_counter()
                    batch = agent.collect(self.sampler, iteration)
                    t1 = time.perf_counter()
                    if on_rollout_end is not None and on_rollout_end(iteration, batch) is False:
                        self.checkpoint(iteration)
                        break
                    stats = agent.update(batch, iteration)
                    t2 = time.perf_counter()
                    steps = batch.num_steps
                    scalars = episode_scalars(batch)
                    scalars.update({f"train/{k}": v for k, v in asdict(stats).items() if v is not None})
                    scalars.update({
                        "time/fps": steps / (t2 - t0),
                        "time/rollout_fps": steps / (t1 - t0),
                        "time/iteration_seconds": t2 - t0,
                        "time/steps_per_particle": steps / cfg.particles,
                    })
                    logger.log(iteration, scalars)
                    last = iteration + 1 == cfg.iterations
                    if (iteration + 1) % cfg.checkpoint_every == 0 or last or interrupt.requested:
                        self.checkpoint(iteration + 1)
                    if progress is not None:
                        progress.update(1)
                        progress.set_postfix(ret=f"{scalars['rollout/ep_rew_mean']:.1f}",
                                             best=f"{scalars['rollout/ep_rew_max_particle']:.1f}",
                                             sps=f"{scalars['time/fps']:.0f}", refresh=False)
                    if interrupt.requested:
                        raise TrainingInterrupted(
                            f"interrupted after iteration {iteration}; checkpoint saved in {self.run_dir} "
                            f"(continue with: python train.py --resume {self.run_dir})")
                    if callback is not None and callback(iteration, scalars) is False:
                        if not last:
                            self.checkpoint(iteration + 1)
                        break
            except NonFiniteError as exc:
                raise NonFiniteError(f"{exc}; the last good checkpoint in {self.run_dir} is kept") from None
            finally:
                if progress is not None:
                    progress.close()
                logger.close()
                self.envs.close()
        return self.run_dir
