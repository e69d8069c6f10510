"""Contextual bandits: tasks (Mushroom, Wheel, Linear, SparseLinear, Classification), a Gymnasium
adapter, and exact Bayesian linear regression per arm (LinFullPost / NeuralLinear's posterior)."""

from steinrl.bandits.linear import NIGLinearRegression
from steinrl.bandits.tasks import (
    BANDIT_TASKS,
    BanditData,
    BanditEnv,
    BanditTask,
    Classification,
    Linear,
    Mushroom,
    SparseLinear,
    Wheel,
    make_task,
    regret,
)

__all__ = ["BANDIT_TASKS", "BanditData", "BanditEnv", "BanditTask", "Classification", "Linear", "Mushroom",
           "NIGLinearRegression", "SparseLinear", "Wheel", "make_task", "regret"]
