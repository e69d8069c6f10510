"""Algorithm names are compositions: ``<method>-<estimator>``, parsed into registered parts.

The *method* (:data:`steinrl.core.methods.METHODS`) fixes the prior family (layer) and
the coupling; the *estimator* fixes how the objective is estimated and thereby
the kind of job: RL estimators (:data:`steinrl.rl.estimators.ESTIMATORS`: ``reinforce``,
``a2c``, ``ppo``) make a :class:`~steinrl.rl.job.PolicyGradientJob`; ``ts`` (Stein
Thompson sampling) and the bandit baselines (``uniform``, ``linfullpost``, ...: names
without a method) make a :class:`~steinrl.bandits.job.BanditJob`; ``sb3-ppo`` and
``sb3-ppo-zoo`` (Stable-Baselines3's PPO, with SB3's defaults or rl-zoo3's entry for the
task) make a :class:`~steinrl.baselines.SB3PPOJob`. Every list of valid names is read from
the registries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from steinrl.bandits.job import BanditJob
from steinrl.baselines import SB3PPOJob
from steinrl.errors import ConfigError
from steinrl.registry import Registry
from steinrl.rl.job import PolicyGradientJob

__all__ = ["Algorithm", "JOBS", "parse_algo", "algo_names"]

#: Job kinds: each names its algorithms (``algorithm_names``) and parses them (``parse``).
JOBS: Registry[Any] = Registry("job")
JOBS.register("rl", PolicyGradientJob)
JOBS.register("bandit", BanditJob)
JOBS.register("sb3", SB3PPOJob)


@dataclass(frozen=True)
class Algorithm:
    """A parsed algorithm name."""

    name: str
    method: str | None  #: None for an algorithm that is not a particle method (a bandit baseline)
    estimator: str  #: the estimator (RL) or agent (bandits)
    job: Any  #: the job class that runs it


def algo_names() -> list[str]:
    """Every valid algorithm name, from the registries."""
    return [name for _, job in JOBS.items() for name in job.algorithm_names()]


def parse_algo(name: Any) -> Algorithm:
    """Split an algorithm name into registered parts; an unknown name lists the valid ones."""
    for _, job in JOBS.items():
        parts = job.parse(str(name))
        if parts is not None:
            return Algorithm(str(name), parts[0], parts[1], job)
    raise ConfigError(f"unknown algo {name!r}; valid algos: {', '.join(algo_names())}")
