"""Advantage actor-critic: GAE(λ) advantages from a per-particle critic."""

from __future__ import annotations

from steinrl.registry import Option, unit_interval
from steinrl.rl.estimators.base import DISCOUNT, ESTIMATORS, NORMALIZE_ADVANTAGES, Advantages, Estimator
from steinrl.rl.estimators.returns import discounted_returns, explained_variance, gae, standardize

__all__ = ["A2C", "GAE_LAMBDA"]

GAE_LAMBDA = Option("gae_lambda", float, 0.97, "GAE(lambda) of the advantages.", check=unit_interval)


@ESTIMATORS.register("a2c")
class A2C(Estimator):
    """Â = GAE(γ, λ) over the critic's values V(s_0..s_T) (time-limit truncation bootstraps,
    a terminal state has value 0). The critic regresses λ-returns, or the discounted
    returns if it says so (``critic.fit_target == "returns"``, rllab's linear baseline)."""

    options = (DISCOUNT, GAE_LAMBDA, NORMALIZE_ADVANTAGES)
    uses_critic = True

    def advantages(self, batch, critic) -> Advantages:
        gamma = self.config["discount"]
        values = critic.values(batch)  # (T + 1, M, E) float64
        adv, targets = gae(batch.rewards, values, batch.terminated, batch.done, gamma, self.config["gae_lambda"])
        if critic.fit_target == "returns":
            targets = discounted_returns(batch.rewards, batch.done, gamma)
        explained = explained_variance(values[:-1], targets, batch.valid)
        if self.config["normalize_advantages"] and not self.option("normalize_per_minibatch", False):
            adv = standardize(adv, batch.valid, dim=(0, 2))
        return Advantages(adv, targets, explained)
