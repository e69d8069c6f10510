"""Estimators of J(θ): REINFORCE, A2C (GAE) and PPO-clip, registered by name.

An estimator turns a rollout into per-particle advantages (:meth:`Estimator.advantages`)
and moves the particles in its own :meth:`Estimator.learn`, one page in its module, read top to
bottom: one particle step on the batch (``reinforce.py``, ``a2c.py``), or PPO's epochs of
minibatch steps (``ppo.py``). Adding one is a new module here with a class registered in
:data:`ESTIMATORS` plus its import below.
"""

# isort: off
from steinrl.rl.estimators.base import ESTIMATORS, Advantages, Estimator
# registers the estimators, in the order the CLI and the docs list them (reinforce, a2c, ppo)
from steinrl.rl.estimators import reinforce, a2c, ppo  # noqa: F401,E402
# isort: on

__all__ = ["ESTIMATORS", "Advantages", "Estimator"]
