"""Baselines with exact Bayesian linear regression per arm (Riquelme et al. 2018).

- ``linfullpost``: Thompson sampling from a Normal-Inverse-Gamma linear regression per
  arm on the raw context (with an intercept), updated exactly after every round.
- ``neurallinear``: the same on the last hidden layer's features of a network trained
  on all data every ``protocol.refit_every`` rounds (no intercept, as Showdown); after each
  retraining the per-arm posteriors are refitted on the new features of all the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from steinrl.bandits.agents.base import AGENTS, BanditAgent, History
from steinrl.bandits.agents.neural import ParticleRegressor
from steinrl.bandits.linear import NIGLinearRegression, NIGSettings
from steinrl.bandits.settings import BanditConfig, ModelSettings
from steinrl.registry import settings_values

__all__ = ["LinFullPost", "NeuralLinear"]


@AGENTS.register("linfullpost")
class LinFullPost(BanditAgent):
    """Thompson sampling with an exact Bayesian linear regression per arm on the context."""

    sections = {"agent": NIGSettings}
    per_round = True

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int) -> None:
        super().__init__(cfg, num_arms, context_dim)
        self.posterior = NIGLinearRegression(num_arms, context_dim, intercept=True, **settings_values(cfg.agent))

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.posterior.sample_rewards(contexts.astype(np.float64), rng).argmax(1)

    def observe(self, contexts: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        self.posterior.observe(contexts.astype(np.float64), arms, rewards)

    def state_dict(self) -> dict[str, Any]:
        return {k: torch.from_numpy(v) for k, v in self.posterior.statistics().items()}

    def load_state_dict(self, state: dict[str, Any], history: History) -> None:
        self.posterior.load_statistics({k: v.numpy() for k, v in state.items()})


@AGENTS.register("neurallinear")
class NeuralLinear(BanditAgent):
    """Thompson sampling with Bayesian linear regressions on a network's last hidden layer."""

    sections = {"agent": NIGSettings, "model": ModelSettings}
    per_round = True

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int) -> None:
        super().__init__(cfg, num_arms, context_dim)
        self.network = ParticleRegressor(cfg, num_arms, context_dim, particles=1, method=None)
        self.posterior = NIGLinearRegression(num_arms, cfg.model.hidden[-1], intercept=False,
                                             **settings_values(cfg.agent))

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.posterior.sample_rewards(self.network.features(contexts), rng).argmax(1)

    def observe(self, contexts: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        self.posterior.observe(self.network.features(contexts), arms, rewards)

    def refit(self, history: History, step: int) -> dict[str, float]:
        scalars = self.network.fit(history, step)
        self.posterior.fit(self.network.features(history.contexts), history.arms, history.rewards)
        return scalars

    def state_dict(self) -> dict[str, Any]:
        posterior = {k: torch.from_numpy(v) for k, v in self.posterior.statistics().items()}
        return {"network": self.network.state_dict(), "posterior": posterior}

    def load_state_dict(self, state: dict[str, Any], history: History) -> None:
        self.network.load_state_dict(state["network"])
        self.posterior.load_statistics({k: v.numpy() for k, v in state["posterior"].items()})
