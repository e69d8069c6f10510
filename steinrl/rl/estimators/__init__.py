"""Estimators of J(θ): REINFORCE, A2C (GAE) and PPO-clip, registered by name.

An estimator turns a rollout into per-particle advantages (:meth:`Estimator.advantages`)
and a per-particle surrogate J(θ_i) whose gradient drives the particle update
(:meth:`Estimator.surrogate`). Adding one is a new module here with a class registered in
:data:`ESTIMATORS` (see ``ppo.py``) plus its import below.
"""

from steinrl.rl.estimators import a2c, ppo, reinforce  # noqa: F401,E402  (registers the estimators)
from steinrl.rl.estimators.base import ESTIMATORS, Advantages, Estimator

__all__ = ["ESTIMATORS", "Advantages", "Estimator"]
