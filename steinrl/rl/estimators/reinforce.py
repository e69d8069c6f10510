"""REINFORCE: standardised discounted returns-to-go, no critic (the SVPG code's estimator)."""

from __future__ import annotations

from steinrl.rl.estimators.base import ESTIMATORS, Advantages, Estimator
from steinrl.rl.estimators.returns import discounted_returns, standardize

__all__ = ["Reinforce"]


@ESTIMATORS.register("reinforce")
class Reinforce(Estimator):
    """Â_t = G_t = Σ_k γ^k r_{t+k} within the episode; episodes cut at the batch end get no bootstrap.
    One particle step per batch (:meth:`Estimator.update`)."""

    def advantages(self, batch, critic) -> Advantages:
        adv = discounted_returns(batch.rewards, batch.done, self.settings.discount)
        if self.settings.normalize_advantages:
            adv = standardize(adv, batch.valid, dim=(0, 2))
        return Advantages(adv)
