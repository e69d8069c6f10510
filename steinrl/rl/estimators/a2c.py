"""Advantage actor-critic: GAE(λ) advantages from a per-particle critic; its update is one
particle step on the whole batch, read top to bottom in :meth:`A2C.learn`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch

from steinrl.registry import setting, unit_interval
from steinrl.rl.critic_fit import fit_beside
from steinrl.rl.diagnostics import UpdateStats
from steinrl.rl.embedding import shared_states
from steinrl.rl.estimators.base import (
    ESTIMATORS,
    Advantages,
    Estimator,
    EstimatorSettings,
    logged,
    masked_mean,
    summarize,
)
from steinrl.rl.estimators.returns import discounted_returns, explained_variance, gae, standardize
from steinrl.rl.rollout import Batch
from steinrl.rl.samples import compact

if TYPE_CHECKING:
    from steinrl.rl.agent import SVPGAgent
    from steinrl.rl.draws import Draws

__all__ = ["A2C", "A2CSettings"]


@dataclass(frozen=True)
class A2CSettings(EstimatorSettings):
    gae_lambda: float = setting(0.97, "GAE(lambda) of the advantages.", check=unit_interval)


@ESTIMATORS.register("a2c")
class A2C(Estimator):
    """Â = GAE(γ, λ) over the critic's values V(s_0..s_T) (time-limit truncation bootstraps,
    a terminal state has value 0). The critic regresses λ-returns, or the discounted
    returns if it says so (``critic.fit_target == "returns"``, rllab's linear baseline).
    One particle step per batch (:meth:`learn`)."""

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

    def learn(self, agent: SVPGAgent, batch: Batch, draws: Draws) -> UpdateStats:
        """One particle step on the whole batch: J(θ_i) = the per-step mean over particle i's
        samples of log π_θi(a|s) · Â; the critic fits on the same samples, in the step
        (``critic.joint``) or by a fit of its own."""
        policy, critic, finite = agent.policy, agent.critic, agent.finite
        # 1. The samples: GAE advantages, then every particle's valid steps compacted to (M, n, ...), the
        #    observations normalised once (the step below bypasses the normaliser); a joint critic's
        #    targets and (value clipping) its values at the rollout.
        advantages = self.advantages(batch, critic)
        samples = compact(batch, advantages.advantages, advantages.value_targets, agent.device, trim=agent.trim)
        with torch.no_grad():
            old_values = critic(samples.obs) if critic.joint and critic.clip_range_vf is not None else None
            obs = policy.obs_norm(samples.obs)
        if agent.embedding_states:  # the kernel's embedding: each particle's actions on B shared states
            agent.shared_states = shared_states(obs, samples.mask, agent.embedding_states, draws)
        embed = partial(policy.embedding, agent.shared_states) if agent.embedding_states else None
        # 2. A critic with a fit of its own regresses on the same samples beside the step: on a second
        #    thread (critic.overlap), else after it (fit.result()).
        fit = None if critic.joint else fit_beside(critic, samples, draws, finite)
        with policy.obs_norm.bypassed():
            # 3. The log-probabilities log π_θi(a|s) (M, n).
            log_prob, entropy = policy.log_prob(obs, samples.actions)
            finite.add("log-probability", log_prob)
            # 4. The losses: the objective J(θ_i) (M,), and a joint critic's value loss (M,), whose
            #    gradient the step weights by vf_coef and clips with J's.
            surrogate = masked_mean(log_prob * samples.advantages, samples.mask)
            value_loss, aux = None, {}
            if critic.joint:
                value_loss = critic.value_loss(obs, samples.targets.to(torch.float32), samples.mask, old_values)
                finite.add("value loss", value_loss)
                aux = {"aux_loss": critic.vf_coef * value_loss.sum(), "aux_params": list(critic.net.parameters()),
                       "aux_optimizer": critic.optimizer}
            # 5. The particle step: α, prior, clipping, the Stein direction, the optimizer (and the critic's).
            result = agent.particle_optimizer.step(surrogate, embed=embed, **aux)
        step = logged(result, value_loss, surrogate=surrogate.detach(), entropy=entropy.detach())
        return summarize([step], advantages, None if fit is None else fit.result())

