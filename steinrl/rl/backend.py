"""The envs an RL run steps: Gymnasium vector envs on the host, or the torch twins of steinrl's
tasks (and MuJoCo Warp's) on the training device (``rollout.env_backend``), and what a batch of
several seeds needs of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium
import torch

from steinrl import envs
from steinrl.errors import ConfigError

if TYPE_CHECKING:
    from steinrl.rl.settings import RLConfig

__all__ = ["check_seeds", "env_backend", "make_envs"]


def make_envs(cfg: RLConfig) -> gymnasium.vector.VectorEnv:
    """All ``M * E`` envs of a run as one vector env."""
    mode = None if envs.is_steinrl_env(cfg.env) else cfg.rollout.vectorization
    return envs.make_vec(cfg.env, cfg.particles * cfg.rollout.envs_per_particle, vectorization_mode=mode,
                         max_episode_steps=cfg.rollout.horizon)


def env_backend(cfg: RLConfig, seeds: int = 1) -> str:
    """``numpy`` or ``torch``: the rollout backend ``cfg.rollout.env_backend`` resolves to
    (several seeds in one batch need the torch twins: each seed group resets from its own
    generator)."""
    from steinrl.envs.torch_tasks import TORCH_TASKS
    from steinrl.envs.warp_mujoco import warp_backend

    if warp_backend(cfg.env, cfg.device, cfg.rollout):  # a MuJoCo task on MuJoCo Warp: a device task, on any device
        return "torch"
    has_twin = envs.is_steinrl_env(cfg.env) and next(
        (s for s, i in envs.SHORT_NAMES.items() if cfg.env in (s, i)), cfg.env) in TORCH_TASKS
    backend = cfg.rollout.env_backend
    if backend == "auto":
        return "torch" if has_twin and (seeds > 1 or torch.device(cfg.device).type != "cpu") else "numpy"
    if backend == "torch" and not has_twin:
        raise ConfigError(f"rollout.env_backend torch runs steinrl's tasks ({', '.join(TORCH_TASKS)}) on the device; "
                          f"{cfg.env!r} has no torch twin: use env_backend numpy")
    if seeds > 1 and backend != "torch":
        raise ConfigError(f"several seeds in one batch need rollout.env_backend torch or auto (their torch twins); "
                          f"got {backend!r}")
    return backend


def check_seeds(cfg: RLConfig, seeds: list[int] | None) -> list[int]:
    """The seeds of a run (``[cfg.seed]`` by default), checked for what a batch of several allows."""
    if seeds is None:
        return [cfg.seed]
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds must be distinct, got {seeds}")
    if len(seeds) > 1:
        if cfg.rollout.sampling == "whole_episodes":
            raise ConfigError("seeds in one batch need rollout.sampling continuing or cut (whole episodes make a "
                              "batch as long as its slowest seed's); e.g. --preset fast")
        if cfg.policy.normalize_obs or cfg.update.proximal_weight:
            raise ConfigError("seeds in one batch cannot share policy.normalize_obs or update.proximal_weight")
    return seeds
