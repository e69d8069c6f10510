"""Bandit agents, registered by name: Stein Thompson sampling (``<method>-ts``) and the
baselines users know (``uniform``, ``greedy``, ``egreedy``, ``linfullpost``, ``neurallinear``), and
Thompson sampling from the variational posteriors of ``steinrl.bayes`` (``bbb-ts``, ``badam-ts``,
``kflow-ts``, ``rdp-ts``)."""

from steinrl.bandits.agents.base import AGENTS, BanditAgent, History
from steinrl.bandits.agents.linear import LinFullPost, NeuralLinear  # noqa: E402  (registers them)
from steinrl.bandits.agents.neural import (
                                          LIKELIHOOD_OPTIONS,
                                          MODEL_OPTIONS,
                                          EpsilonGreedy,
                                          Greedy,
                                          ParticleRegressor,
                                          SteinThompsonSampling,
                                          Uniform,
)
from steinrl.bandits.agents.variational import VariationalThompsonSampling  # noqa: E402  (bbb-ts, ... rdp-ts)

__all__ = ["AGENTS", "BanditAgent", "History", "LIKELIHOOD_OPTIONS", "MODEL_OPTIONS", "EpsilonGreedy", "Greedy",
           "ParticleRegressor", "SteinThompsonSampling", "Uniform", "LinFullPost", "NeuralLinear",
           "VariationalThompsonSampling"]
