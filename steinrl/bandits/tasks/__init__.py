"""Contextual-bandit tasks (Riquelme, Tucker & Snoek 2018, "Deep Bayesian Bandits Showdown").

A task draws rounds in bulk: :meth:`BanditTask.sample` returns a :class:`BanditData` holding,
for every round, the context, the expected reward E[r | x, a] of every arm and one sampled
reward of every arm (an agent only sees the arm it pulls). Keeping the expected rewards makes
the regret exact rather than a noisy estimate::

    task = make_task("Wheel", delta=0.9)
    data = task.sample(2000, np.random.default_rng(0))     # contexts (2000, 2), rewards (2000, 5)
    arms = my_agent_arms(data.contexts)                    # (2000,) ints
    cumulative_regret = regret(data.expected_rewards, arms).cumsum()

Tasks are registered by name in :data:`BANDIT_TASKS` and declare their options as ``Settings``
(a frozen dataclass, the ``task`` config section; ``options`` is derived from it); :func:`make_task`
builds one and validates the options.
:class:`BanditEnv` serves any task one round at a time as a Gymnasium environment.

Modules: :mod:`.base` (data, regret, base class, registry), :mod:`.mushroom`,
:mod:`.synthetic` (Wheel, Linear, SparseLinear), :mod:`.classification`, :mod:`.env`.
"""

from steinrl.bandits.tasks.base import BANDIT_TASKS, BanditData, BanditTask, TaskSettings, make_task, regret
from steinrl.bandits.tasks.classification import Classification
from steinrl.bandits.tasks.env import BanditEnv
from steinrl.bandits.tasks.mushroom import Mushroom
from steinrl.bandits.tasks.synthetic import Linear, SparseLinear, Wheel

__all__ = ["BANDIT_TASKS", "BanditData", "BanditEnv", "BanditTask", "Classification", "Linear", "Mushroom",
           "SparseLinear", "TaskSettings", "Wheel", "make_task", "regret"]
