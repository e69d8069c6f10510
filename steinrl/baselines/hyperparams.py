"""The hyperparameters of SB3's PPO runs: SB3's defaults, or rl-zoo3's tuned entry for the task.

Both algorithms have the same ``sb3`` config section (:class:`SB3Settings`); only its
defaults differ:

- ``sb3-ppo``: SB3's own defaults, read from the signatures of
  :class:`stable_baselines3.PPO` and :class:`~stable_baselines3.common.policies.ActorCriticPolicy`
  (plus the network SB3 builds when ``net_arch`` is None, and the zoo's conventions for
  keys that are not PPO arguments: one env, no VecNormalize, 10^6 steps);
- ``sb3-ppo-zoo``: those, overridden by the task's entry of ``configs/sb3/ppo_zoo.yaml``,
  a copy of rl-baselines3-zoo's ``hyperparams/ppo.yml`` (the file names the commit and
  each entry).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import inspect
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from steinrl.errors import ConfigError
from steinrl.registry import (
    Option,
    at_least_one,
    compose,
    non_negative,
    positive,
    setting,
    settings_options,
    step_size,
    unit_interval,
)

__all__ = ["ACTIVATIONS", "ZOO_FILE", "SB3Settings", "hyperparameters", "sb3_defaults", "sb3_options", "sb3_settings",
           "zoo_entry"]

#: rl-zoo3's PPO entries, as shipped with the package (``steinrl.configs``).
ZOO_FILE = Path(str(importlib.resources.files("steinrl.configs"))) / "sb3" / "ppo_zoo.yaml"
#: ``activation`` names and their torch modules' names.
ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU", "elu": "ELU", "leaky_relu": "LeakyReLU"}



def _sde_freq(value: int) -> str | None:
    return None if value >= -1 else "must be >= -1 (-1: sample the noise once per rollout)"


@dataclass(frozen=True)
class SB3Settings:
    """The ``sb3`` config section: SB3's PPO hyperparameters. No defaults here: they are the
    algorithm's (:func:`hyperparameters`: SB3's, or the task's rl-zoo3 entry), given per config."""

    timesteps: int = setting(doc="Total env steps of the run (rounded up to whole rollouts of n_steps x n_envs).",
                             kind=int, check=at_least_one)
    n_envs: int = setting(doc="Parallel envs (SB3's DummyVecEnv); a rollout is n_steps x n_envs env steps.", kind=int,
                          check=at_least_one)
    n_steps: int = setting(doc="Steps per env per rollout (one job iteration = one rollout + one PPO update).",
                           kind=int, check=at_least_one)
    batch_size: int = setting(doc="PPO minibatch size.", kind=int, check=at_least_one)
    n_epochs: int = setting(doc="Passes over the rollout per update.", kind=int, check=at_least_one)
    learning_rate: float = setting(doc="Adam step size (a constant: none of the shipped zoo entries uses a schedule).",
                                   kind=float, check=step_size)
    gamma: float = setting(doc="Discount factor (also VecNormalize's reward discount).", kind=float,
                           check=unit_interval)
    gae_lambda: float = setting(doc="GAE(lambda).", kind=float, check=unit_interval)
    clip_range: float = setting(doc="PPO's clip epsilon.", kind=float, check=positive)
    ent_coef: float = setting(doc="Entropy bonus coefficient.", kind=float, check=non_negative)
    vf_coef: float = setting(doc="Value loss coefficient.", kind=float, check=non_negative)
    max_grad_norm: float = setting(doc="Gradient norm clip.", kind=float, check=positive)
    normalize: bool = setting(doc="VecNormalize observations and rewards (the zoo's normalize: true).", kind=bool)
    use_sde: bool = setting(doc="Generalised state-dependent exploration.", kind=bool)
    sde_sample_freq: int = setting(doc="With use_sde: resample the noise every this many steps (-1: once per "
                                   "rollout).", kind=int, check=_sde_freq)
    log_std_init: float = setting(doc="Initial log standard deviation of the Gaussian policy.", kind=float)
    ortho_init: bool = setting(doc="Orthogonal initialisation of the networks (SB3's default).", kind=bool)
    net_arch: list[int] = setting(doc="Hidden layer sizes of the policy and of the value network (each its own).",
                                  kind=list[int], check=at_least_one)
    activation: str = setting(doc="Hidden activation.", kind=str, choices=tuple(ACTIVATIONS))
    horizon: int | None = setting(doc="Maximum episode length (null: the task's own time limit).", kind=(int, None),
                                  check=at_least_one)


@lru_cache(maxsize=1)
def sb3_defaults() -> dict[str, Any]:
    """SB3's PPO defaults for every ``sb3`` option and ``timesteps``, read from SB3's signatures."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.policies import ActorCriticPolicy

    ppo = {k: p.default for k, p in inspect.signature(PPO.__init__).parameters.items()}
    policy = {k: p.default for k, p in inspect.signature(ActorCriticPolicy.__init__).parameters.items()}
    activation = {v: k for k, v in ACTIVATIONS.items()}[policy["activation_fn"].__name__]
    values = {k: ppo[k] for k in ("n_steps", "batch_size", "n_epochs", "learning_rate", "gamma", "gae_lambda",
                                  "clip_range", "ent_coef", "vf_coef", "max_grad_norm", "use_sde", "sde_sample_freq")}
    values.update(log_std_init=float(policy["log_std_init"]), ortho_init=bool(policy["ortho_init"]),
                  activation=activation,
                  net_arch=[64, 64],  # ActorCriticPolicy's network when net_arch is None (pi and vf: [64, 64])
                  n_envs=1, normalize=False, horizon=None,  # not PPO arguments: the zoo's conventions
                  timesteps=1_000_000)  # the zoo's `default` entry (tasks it does not list)
    return values


@lru_cache(maxsize=1)
def _zoo() -> dict[str, Any]:
    data = yaml.safe_load(ZOO_FILE.read_text())
    return {"tasks": dict(data["tasks"]), "entries": {k: dict(v) for k, v in data["entries"].items()}}


def zoo_entry(env: str) -> tuple[str, dict[str, Any]] | None:
    """``(zoo entry name, its values)`` for task ``env``, or None if the zoo file has none."""
    zoo = _zoo()
    name = zoo["tasks"].get(env)
    return None if name is None else (name, dict(zoo["entries"][name]))


def zoo_tasks() -> list[str]:
    """The tasks ``configs/sb3/ppo_zoo.yaml`` has an entry for."""
    return list(_zoo()["tasks"])


def hyperparameters(variant: str, env: str) -> dict[str, Any]:
    """The defaults of ``sb3-<variant>`` on ``env``: SB3's, over them the zoo entry for ``ppo-zoo``.

    :raises ConfigError: ``ppo-zoo`` on a task without a zoo entry.
    """
    values = dict(sb3_defaults())
    if variant == "ppo-zoo":
        found = zoo_entry(env)
        if found is None:
            raise ConfigError(f"sb3-ppo-zoo: {ZOO_FILE.name} has no rl-zoo3 entry for {env!r}; tasks with one: "
                              f"{', '.join(zoo_tasks())} (use sb3-ppo, SB3's defaults, on other tasks)")
        values.update(found[1])
    return values


def sb3_settings(variant: str, env: str) -> type:
    """The ``sb3`` section's settings class, with the defaults of ``sb3-<variant>`` on ``env``."""
    values = hyperparameters(variant, env)
    return compose("SB3Section", SB3Settings,
                   defaults={f.name: values[f.name] for f in dataclasses.fields(SB3Settings)})


def sb3_options(variant: str, env: str) -> tuple[Option, ...]:
    """The ``sb3`` section's options, with the defaults of ``sb3-<variant>`` on ``env``."""
    return settings_options(sb3_settings(variant, env))
