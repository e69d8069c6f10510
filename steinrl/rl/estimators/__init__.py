"""Estimators of J(θ): REINFORCE, A2C (GAE) and PPO-clip, registered by name.

An estimator turns a rollout into per-particle advantages (:meth:`Estimator.advantages`)
and a per-particle surrogate J(θ_i) whose gradient drives the particle update
(:meth:`Estimator.surrogate`). Adding one is a new module here with a class registered in
:data:`ESTIMATORS` (see ``ppo.py``) plus its import below.
"""

from steinrl.rl.estimators.base import ESTIMATORS, Advantages, Estimator
from steinrl.rl.estimators import reinforce, a2c, ppo  # noqa: F401,E402  (registers the estimators)

__all__ = ["ESTIMATORS", "Advantages", "Estimator"]
