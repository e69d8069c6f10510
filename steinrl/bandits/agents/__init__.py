"""Bandit agents, registered by name: Stein Thompson sampling (``<method>-ts``) and the
baselines users know (``uniform``, ``greedy``, ``egreedy``, ``linfullpost``, ``neurallinear``)."""

from steinrl.bandits.agents.base import AGENTS, BanditAgent, History
from steinrl.bandits.agents.neural import (LIKELIHOOD_OPTIONS, MODEL_OPTIONS, EpsilonGreedy, Greedy, ParticleRegressor,
                                          SteinThompsonSampling, Uniform)
from steinrl.bandits.agents.linear import LinFullPost, NeuralLinear  # noqa: E402  (registers them)

__all__ = ["AGENTS", "BanditAgent", "History", "LIKELIHOOD_OPTIONS", "MODEL_OPTIONS", "EpsilonGreedy", "Greedy",
           "ParticleRegressor", "SteinThompsonSampling", "Uniform", "LinFullPost", "NeuralLinear"]
