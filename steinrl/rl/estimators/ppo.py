"""PPO-clip (Schulman et al., 2017) over M particles: the whole update, read top to bottom.

J(θ_i) is the clipped surrogate mean_t min(r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t), r_t =
π_θ(a_t|s_t) / π_old(a_t|s_t), on A2C's GAE advantages. Each batch is reused for ``epochs``
passes; each pass splits every particle's own samples into ``minibatches`` random parts (the
same number for every particle, all particles stepped together) and moves the particles once
per part, so the Stein coupling acts at every minibatch step. Its gradient at θ = θ_old equals
the A2C surrogate's, so with ``epochs: 1`` and ``minibatches: 1`` PPO is A2C.

The rest of the recipe (Huang et al. 2022, "The 37 implementation details of PPO"; SB3,
CleanRL) is here, off by default: per-minibatch advantage normalisation, an entropy bonus,
per-particle gradient-norm clipping (applied by the particle step), linear learning-rate
annealing and reward scaling; the critic's options add the joint value loss and its clipping,
the policy's the orthogonal init and observation normalisation. Time-limit truncation always
bootstraps (GAE).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from steinrl.errors import ConfigError
from steinrl.registry import at_least_one, non_negative, positive, setting
from steinrl.rl.critic_fit import fit_beside
from steinrl.rl.diagnostics import UpdateStats
from steinrl.rl.embedding import shared_states
from steinrl.rl.estimators.a2c import A2C, A2CSettings
from steinrl.rl.estimators.base import ESTIMATORS, logged, masked_mean, summarize
from steinrl.rl.minibatches import minibatch_keys, minibatches
from steinrl.rl.normalization import RewardScaler
from steinrl.rl.rollout import Batch
from steinrl.rl.samples import compact

if TYPE_CHECKING:
    from steinrl.rl.agent import SVPGAgent
    from steinrl.rl.draws import Draws

__all__ = ["PPO", "PPOSettings", "standardize_minibatch"]



@dataclass(frozen=True)
class PPOSettings(A2CSettings):
    clip_range: float = setting(0.2, "PPO's ε: the probability ratio is clipped to [1 - ε, 1 + ε].", check=positive)
    epochs: int = setting(4, "Passes over each particle's batch per iteration.", check=at_least_one)
    minibatches: int = setting(
        1, "Random parts each particle's batch is split into per pass, the same number for every particle, a "
        "particle step on each (32 with 2048 steps: SB3's batch_size 64); 1: the whole batch.",
        check=at_least_one)
    normalize_per_minibatch: bool = setting(
        False, "With normalize_advantages: standardise over each particle's minibatch (mean, unbiased std + 1e-8: "
        "SB3, CleanRL) instead of its whole batch.")
    ent_coef: float = setting(0.0, "Entropy bonus: J gains ent_coef times the policy's mean entropy.",
                              check=non_negative)
    max_grad_norm: float | None = setting(
        None, "Clip each particle's gradient of J (with critic.joint: and of its vf_coef-weighted value loss) to "
        "this Euclidean norm before the particle step (SB3's 0.5, per particle here); null: no clipping.",
        kind=(float, None), check=positive)
    anneal_lr: bool = setting(False, "Anneal update.lr and critic.lr linearly to 0 over the run: lr (1 - iteration "
                              "/ iterations) (CleanRL).")
    scale_rewards: bool = setting(
        False, "Divide the rewards by the running std of the discounted return (per seed) before the advantages "
        "(SB3's VecNormalize, Gymnasium's NormalizeReward); logged returns stay raw.")
    reward_clip: float = setting(10.0, "With scale_rewards: scaled rewards are clipped to [-reward_clip, "
                                 "reward_clip].", check=positive)
    target_kl: float | None = setting(
        None, "Stop the update's epochs early once a minibatch's approx_kl, the mean over the particles, passes 1.5 "
        "target_kl (SB3's early stop; checked before the minibatch's step, one host sync per step; not with seeds "
        "in one batch); null: every epoch.", kind=(float, None), check=positive)


def standardize_minibatch(advantages: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """(Â − mean) / (std + eps) per particle over its masked samples ``(M, b)``, std with
    Bessel's correction (``torch.std``: SB3, CleanRL); unchanged where a particle has fewer
    than 2 samples (SB3 skips normalising a minibatch of one)."""
    count = mask.sum(1, keepdim=True)
    mean = (advantages * mask).sum(1, keepdim=True) / count.clamp_min(1.0)
    var = ((advantages - mean).square() * mask).sum(1, keepdim=True) / (count - 1.0).clamp_min(1.0)
    return torch.where(count > 1, (advantages - mean) / (var.sqrt() + eps), advantages)


@ESTIMATORS.register("ppo")
class PPO(A2C):
    """A2C's advantages with the clipped probability-ratio surrogate, several updates per batch."""

    Settings = PPOSettings
    reward_scaler: RewardScaler | None = None  #: scale_rewards' running statistics (built by the first update)

    def __init__(self, settings: PPOSettings | None = None, groups: int = 1, device: torch.device | str = "cpu"):
        super().__init__(settings, groups, device)
        if self.settings.target_kl is not None and self.groups > 1:
            raise ConfigError("estimator.target_kl stops every particle of a batch together, so seeds in one batch "
                              "would stop on each other's KL: run the seeds apart, or target_kl null")

    @classmethod
    def host_reads(cls, settings: PPOSettings) -> list[str]:
        return ["estimator.target_kl reads the KL back to the host at every step"] if settings.target_kl is not None \
            else []

    @property
    def max_grad_norm(self) -> float | None:
        return self.settings.max_grad_norm

    def lr_fraction(self, progress: float) -> float:
        """``anneal_lr``: 1 − progress, the full step sizes at the first update, linear to 0 over
        the run (CleanRL; ``progress`` is the fraction of the run done before the update)."""
        return max(0.0, 1.0 - progress) if self.settings.anneal_lr else 1.0

    def learn(self, agent: SVPGAgent, batch: Batch, draws: Draws) -> UpdateStats:
        """``epochs`` passes of ``minibatches`` particle steps on one batch (the step sizes, annealed
        by :meth:`lr_fraction`, are set before).

        The logged surrogate, entropy and diagnostics are means over the last pass's steps. With
        ``target_kl`` the update stops before the first minibatch whose approx_kl (mean over the
        particles) passes 1.5 ``target_kl`` (the first minibatch, at the sampling policy, always
        steps; one host sync per step).
        """
        s, policy, critic, finite = self.settings, agent.policy, agent.critic, agent.finite
        # 1. Rewards scaled by the running std of the return (per seed).
        if s.scale_rewards:
            if self.reward_scaler is None:
                self.reward_scaler = RewardScaler(self.groups, s.discount, s.reward_clip, device=self.device)
            batch = self.reward_scaler.scale_batch(batch)
        # 2. The samples: GAE advantages, then every particle's valid steps compacted to (M, n, ...) with the
        #    sampling policy's log-probs (r_t's denominator), the observations normalised once (the steps
        #    bypass the normaliser); a joint critic's targets and (value clipping) its values at the rollout.
        advantages = self.advantages(batch, critic, normalize=s.normalize_advantages and not s.normalize_per_minibatch)
        samples = compact(batch, advantages.advantages, advantages.value_targets, agent.device, trim=agent.trim)
        with torch.no_grad():
            old_log_prob = policy.log_prob(samples.obs, samples.actions)[0]  # (M, n)
            inputs = {"obs": policy.obs_norm(samples.obs), "actions": samples.actions, "mask": samples.mask,
                      "advantages": samples.advantages, "old_log_prob": old_log_prob}
            if critic.joint:
                inputs["targets"] = samples.targets.to(torch.float32)
                if critic.clip_range_vf is not None:
                    inputs["old_values"] = critic(samples.obs)
        if agent.embedding_states:  # the kernel's embedding: each particle's actions on B shared states
            agent.shared_states = shared_states(inputs["obs"], samples.mask, agent.embedding_states, draws)
        embed = partial(policy.embedding, agent.shared_states) if agent.embedding_states else None
        keys = minibatch_keys(samples.mask, s.epochs, draws) if s.minibatches > 1 else None  # each seed's own shuffle
        # 3. A critic with a fit of its own regresses on the same samples beside the steps: on a second
        #    thread (critic.overlap), else after them (fit.result()).
        fit = None if critic.joint else fit_beside(critic, samples, draws, finite)
        # 4. Epochs of minibatch steps. (A categorical entropy over the real samples only where the recipe's
        #    options are on: the default logs the mean over all compacted columns, padding included.)
        entropy_mask = s.ent_coef > 0 or s.minibatches > 1
        steps: list[dict[str, Any]] = []
        epochs_run, stop = 0, False
        with policy.obs_norm.bypassed():
            for epoch in range(s.epochs):
                logs = epoch == s.epochs - 1 or s.target_kl is not None  # the pass(es) whose means are logged
                epoch_steps = []
                for part in minibatches(inputs, s.minibatches, None if keys is None else keys[epoch]):
                    obs, mask, old = part["obs"], part["mask"], part["old_log_prob"]
                    # the log-probabilities log π_θi(a|s) (M, b), and SB3's diagnostics of the ratio
                    log_prob, entropy = policy.log_prob(obs, part["actions"], mask=mask if entropy_mask else None)
                    finite.add("log-probability", log_prob)
                    diagnostics = self.diagnostics(log_prob.detach(), old, mask) if logs else {}
                    if s.target_kl is not None and (steps or epoch_steps) and \
                            float(diagnostics["approx_kl"].mean()) > 1.5 * s.target_kl:
                        stop = True  # SB3: this minibatch takes no step, and no later one either
                        break
                    # the losses: J(θ_i) (M,), the clipped surrogate plus the entropy bonus; a joint critic's
                    # value loss (M,), whose gradient the step weights by vf_coef and clips with J's
                    surrogate = self.surrogate(log_prob, old, part["advantages"], mask)
                    objective = surrogate + s.ent_coef * entropy if s.ent_coef else surrogate
                    value_loss, aux = None, {}
                    if critic.joint:
                        value_loss = critic.value_loss(obs, part["targets"], mask, part.get("old_values"))
                        finite.add("value loss", value_loss)
                        aux = {"aux_loss": critic.vf_coef * value_loss.sum(),
                               "aux_params": list(critic.net.parameters()), "aux_optimizer": critic.optimizer}
                    # the particle step: α, prior, clipping, the Stein direction, the optimizer (and the critic's)
                    result = agent.particle_optimizer.step(objective, embed=embed, logged=logs, **aux)
                    epoch_steps.append(logged(result, value_loss, surrogate=surrogate.detach(),
                                              entropy=entropy.detach(), **diagnostics))
                steps = epoch_steps or steps  # the last pass that stepped
                epochs_run += bool(epoch_steps)
                if stop:
                    break
        if s.target_kl is not None:  # how many epochs stepped, logged as train/ppo_epochs
            for step in steps:
                step["ppo_epochs"] = torch.full_like(step["surrogate"], float(epochs_run))
        return summarize(steps, advantages, None if fit is None else fit.result())

    def surrogate(self, log_prob: Tensor, old_log_prob: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
        """The clipped surrogate per particle ``(M,)`` from log-probs ``(M, b)`` under the current
        and the sampling policy, advantages and the real-sample mask ``(M, b)``."""
        s = self.settings
        if s.normalize_advantages and s.normalize_per_minibatch:
            advantages = standardize_minibatch(advantages, mask)
        ratio = torch.exp(log_prob - old_log_prob)
        clipped = torch.minimum(ratio * advantages, ratio.clamp(1.0 - s.clip_range, 1.0 + s.clip_range) * advantages)
        return masked_mean(clipped, mask)

    @torch.no_grad()
    def diagnostics(self, log_prob: Tensor, old_log_prob: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """SB3's ``clip_fraction`` (share of samples with |r − 1| > ε) and ``approx_kl``
        (mean of (r − 1) − log r), per particle ``(M,)``."""
        log_ratio = log_prob - old_log_prob
        clipped = ((torch.exp(log_ratio) - 1.0).abs() > self.settings.clip_range).to(mask.dtype)
        return {"clip_fraction": masked_mean(clipped, mask),
                "approx_kl": masked_mean(torch.expm1(log_ratio) - log_ratio, mask)}

    # --- state: the reward scaler's statistics ------------------------------------------------
    def persistent_tensors(self) -> dict[str, Tensor]:
        scaler = self.reward_scaler
        if scaler is None:
            return {}
        return {f"reward_scaler.{k}": getattr(scaler, k) for k in ("mean", "var", "count", "returns")
                if getattr(scaler, k) is not None}

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Any]:
        return {} if self.reward_scaler is None else {"reward_scaler": self.reward_scaler.state_dict(group, groups)}

    def load_state_dict(self, states: list[dict[str, Any]]) -> None:
        if "reward_scaler" in states[0]:
            s = self.settings
            self.reward_scaler = RewardScaler(self.groups, s.discount, s.reward_clip, device=self.device)
            self.reward_scaler.load_state_dict([st["reward_scaler"] for st in states])
