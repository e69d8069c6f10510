"""Algorithm names are compositions: ``<method>-<estimator>``, parsed into registered parts.

The *method* (:data:`steinrl.core.methods.METHODS`) fixes the prior family (layer) and
the particle update; the *estimator* fixes how the objective is estimated and thereby
the kind of job: RL estimators (:data:`steinrl.rl.estimators.ESTIMATORS`: ``reinforce``,
``a2c``, ``ppo``) make a :class:`~steinrl.rl.job.PolicyGradientJob`. Every list of valid
names is read from the registries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from steinrl.core.methods import METHODS
from steinrl.errors import ConfigError
from steinrl.registry import Registry
from steinrl.rl.job import PolicyGradientJob

__all__ = ["Algorithm", "JOBS", "parse_algo", "algo_names"]

#: Job kinds: each holds the registry of estimators its algorithm names end in.
JOBS: Registry[Any] = Registry("job")
JOBS.register("rl", PolicyGradientJob)


@dataclass(frozen=True)
class Algorithm:
    """A parsed algorithm name."""

    name: str
    method: str
    estimator: str
    job: Any  #: the job class that runs it


def algo_names() -> list[str]:
    """Every valid algorithm name, from the registries."""
    return [f"{m}-{e}" for _, job in JOBS.items() for e in job.estimators for m in METHODS]


def parse_algo(name: Any) -> Algorithm:
    """Split ``<method>-<estimator>`` into registered parts; an unknown name lists the valid ones."""
    method, _, estimator = str(name).partition("-")
    for _, job in JOBS.items():
        if method in METHODS and estimator in job.estimators:
            return Algorithm(str(name), method, estimator, job)
    raise ConfigError(f"unknown algo {name!r}; valid algos: {', '.join(algo_names())}")
