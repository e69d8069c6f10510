"""The hyperparameters of SB3's PPO runs: SB3's defaults, or rl-zoo3's tuned entry for the task.

Both algorithms have the same ``sb3`` config section (:data:`OPTION_DOCS`); only its
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

import importlib.resources
import inspect
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from steinrl.errors import ConfigError
from steinrl.registry import Option, at_least_one, non_negative, positive, step_size, unit_interval

__all__ = ["ACTIVATIONS", "ZOO_FILE", "hyperparameters", "sb3_defaults", "sb3_options", "zoo_entry"]

#: rl-zoo3's PPO entries, as shipped with the package (``steinrl.configs``).
ZOO_FILE = Path(str(importlib.resources.files("steinrl.configs"))) / "sb3" / "ppo_zoo.yaml"
#: ``activation`` names and their torch modules' names.
ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU", "elu": "ELU", "leaky_relu": "LeakyReLU"}



def _sde_freq(value: Any) -> str | None:
    return None if value >= -1 else "must be >= -1 (-1: sample the noise once per rollout)"


def _options(typ: Any, check: Any, **docs: str) -> dict[str, tuple[Any, str, Any]]:
    """``name -> (typ, doc, check)`` for options sharing a type and a check."""
    return {name: (typ, doc, check) for name, doc in docs.items()}


#: The ``sb3`` section: ``name -> (type, doc, check)``; the defaults come from the algorithm.
OPTION_DOCS: dict[str, tuple[Any, str, Any]] = {
    **_options(int, at_least_one,
               timesteps="Total env steps of the run (rounded up to whole rollouts of n_steps x n_envs).",
               n_envs="Parallel envs (SB3's DummyVecEnv); a rollout is n_steps x n_envs env steps.",
               n_steps="Steps per env per rollout (one job iteration = one rollout + one PPO update).",
               batch_size="PPO minibatch size.", n_epochs="Passes over the rollout per update."),
    "learning_rate": (float, "Adam step size (a constant: none of the shipped zoo entries uses a schedule).",
                      step_size),
    **_options(float, unit_interval, gamma="Discount factor (also VecNormalize's reward discount).",
               gae_lambda="GAE(lambda)."),
    "clip_range": (float, "PPO's clip epsilon.", positive),
    **_options(float, non_negative, ent_coef="Entropy bonus coefficient.", vf_coef="Value loss coefficient."),
    "max_grad_norm": (float, "Gradient norm clip.", positive),
    **_options(bool, None, normalize="VecNormalize observations and rewards (the zoo's normalize: true).",
               use_sde="Generalised state-dependent exploration."),
    "sde_sample_freq": (int, "With use_sde: resample the noise every this many steps (-1: once per rollout).",
                        _sde_freq),
    "log_std_init": (float, "Initial log standard deviation of the Gaussian policy.", None),
    "ortho_init": (bool, "Orthogonal initialisation of the networks (SB3's default).", None),
    "net_arch": (list[int], "Hidden layer sizes of the policy and of the value network (each its own).",
                 at_least_one),
    "activation": (str, "Hidden activation.", None),
    "horizon": ((int, None), "Maximum episode length (null: the task's own time limit).", at_least_one),
}


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


def sb3_options(variant: str, env: str) -> tuple[Option, ...]:
    """The ``sb3`` section's options, with the defaults of ``sb3-<variant>`` on ``env``."""
    values = hyperparameters(variant, env)
    return tuple(
        Option(name, typ, values[name], doc, check=check, choices=tuple(ACTIVATIONS) if name == "activation" else None)
        for name, (typ, doc, check) in OPTION_DOCS.items())
