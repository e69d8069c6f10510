"""REINFORCE: standardised discounted returns-to-go, no critic (the SVPG code's estimator)."""

from __future__ import annotations

from steinrl.rl.estimators.base import DISCOUNT, ESTIMATORS, NORMALIZE_ADVANTAGES, Advantages, Estimator
from steinrl.rl.estimators.returns import discounted_returns, standardize

__all__ = ["Reinforce"]


@ESTIMATORS.register("reinforce")
class Reinforce(Estimator):
    """Â_t = G_t = Σ_k γ^k r_{t+k} within the episode; episodes cut at the batch end get no bootstrap."""

    options = (DISCOUNT, NORMALIZE_ADVANTAGES)

    def advantages(self, batch, critic) -> Advantages:
        adv = discounted_returns(batch.rewards, batch.done, self.config["discount"])
        if self.config["normalize_advantages"]:
            adv = standardize(adv, batch.valid, dim=(0, 2))
        return Advantages(adv)
