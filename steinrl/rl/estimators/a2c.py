"""Advantage actor-critic: GAE(λ) advantages from a per-particle critic."""

from __future__ import annotations

from dataclasses import dataclass

from steinrl.registry import setting, unit_interval
from steinrl.rl.estimators.base import ESTIMATORS, Advantages, Estimator, EstimatorSettings
from steinrl.rl.estimators.returns import discounted_returns, explained_variance, gae, standardize

__all__ = ["A2C", "A2CSettings"]


@dataclass(frozen=True)
class A2CSettings(EstimatorSettings):
    gae_lambda: float = setting(0.97, "GAE(lambda) of the advantages.", check=unit_interval)


@ESTIMATORS.register("a2c")
class A2C(Estimator):
    """Â = GAE(γ, λ) over the critic's values V(s_0..s_T) (time-limit truncation bootstraps,
    a terminal state has value 0). The critic regresses λ-returns, or the discounted
    returns if it says so (``critic.fit_target == "returns"``, rllab's linear baseline).
    One particle step per batch (:meth:`Estimator.update`)."""

    Settings = A2CSettings
    uses_critic = True

    def advantages(self, batch, critic, normalize: bool | None = None) -> Advantages:
        """``normalize``: standardise over each particle's batch (default: ``normalize_advantages``)."""
        s = self.settings
        values = critic.values(batch)  # (T + 1, M, E) float64
        adv, targets = gae(batch.rewards, values, batch.terminated, batch.done, s.discount, s.gae_lambda)
        if critic.fit_target == "returns":
            targets = discounted_returns(batch.rewards, batch.done, s.discount)
        explained = explained_variance(values[:-1], targets, batch.valid)
        if s.normalize_advantages if normalize is None else normalize:
            adv = standardize(adv, batch.valid, dim=(0, 2))
        return Advantages(adv, targets, explained)
