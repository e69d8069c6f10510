"""REINFORCE: standardised discounted returns-to-go, no critic (the SVPG code's estimator); its
update is one particle step on the whole batch, read top to bottom in :meth:`Reinforce.learn`."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import torch

from steinrl.rl.diagnostics import UpdateStats
from steinrl.rl.embedding import shared_states
from steinrl.rl.estimators.base import ESTIMATORS, Advantages, Estimator, logged, masked_mean, summarize
from steinrl.rl.estimators.returns import discounted_returns, standardize
from steinrl.rl.rollout import Batch
from steinrl.rl.samples import compact

if TYPE_CHECKING:
    from steinrl.rl.agent import SVPGAgent
    from steinrl.rl.draws import Draws

__all__ = ["Reinforce"]


@ESTIMATORS.register("reinforce")
class Reinforce(Estimator):
    """Â_t = G_t = Σ_k γ^k r_{t+k} within the episode; episodes cut at the batch end get no bootstrap.
    One particle step per batch (:meth:`learn`)."""

    def advantages(self, batch, critic) -> Advantages:
        adv = discounted_returns(batch.rewards, batch.done, self.settings.discount)
        if self.settings.normalize_advantages:
            adv = standardize(adv, batch.valid, dim=(0, 2))
        return Advantages(adv)

    def learn(self, agent: SVPGAgent, batch: Batch, draws: Draws) -> UpdateStats:
        """One particle step on the whole batch: J(θ_i) = the per-step mean over particle i's
        samples of log π_θi(a|s) · Â."""
        policy, finite = agent.policy, agent.finite
        # 1. The samples: returns-to-go, then every particle's valid steps compacted to (M, n, ...),
        #    the observations normalised once (the step below bypasses the normaliser).
        advantages = self.advantages(batch, None)
        samples = compact(batch, advantages.advantages, None, agent.device, trim=agent.trim)
        with torch.no_grad():
            obs = policy.obs_norm(samples.obs)
        if agent.embedding_states:  # the kernel's embedding: each particle's actions on B shared states
            agent.shared_states = shared_states(obs, samples.mask, agent.embedding_states, draws)
        embed = partial(policy.embedding, agent.shared_states) if agent.embedding_states else None
        with policy.obs_norm.bypassed():
            # 2. The log-probabilities log π_θi(a|s) (M, n).
            log_prob, entropy = policy.log_prob(obs, samples.actions)
            finite.add("log-probability", log_prob)
            # 3. The objective J(θ_i) (M,).
            surrogate = masked_mean(log_prob * samples.advantages, samples.mask)
            # 4. The particle step: α, prior, clipping, the Stein direction, the optimizer.
            result = agent.particle_optimizer.step(surrogate, embed=embed)
        return summarize([logged(result, surrogate=surrogate.detach(), entropy=entropy.detach())], advantages, None)
