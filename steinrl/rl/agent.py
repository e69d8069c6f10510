"""The SVPG agent: policy particles x prior x estimator x particle update.

One iteration, :meth:`SVPGAgent.collect` then :meth:`SVPGAgent.update`:

1. materialise every particle's dense weights once, then step all ``M * E`` envs with
   one ensemble forward per step (noise pre-drawn for the whole batch);
2. the estimator turns the rollout into per-particle advantages (REINFORCE returns-to-go,
   or GAE over the critic's values);
3. one batched forward + backward gives g_i = ∇[J(θ_i) / α + w log p(θ_i)] for all
   particles, J being the estimator's surrogate (per-step mean of log π · Â for
   reinforce / a2c, the clipped ratio for ppo);
4. the particle update (SVGD, or independent) moves the particles along φ;
5. the critic, if any, is refitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.core.methods import METHODS
from steinrl.core.priors import make_prior
from steinrl.core.svgd import flatten
from steinrl.core.updates import halved_lr, make_update
from steinrl.errors import NonFiniteError
from steinrl.rl.critics import CRITICS, Critic, LinearBaseline
from steinrl.rl.estimators import ESTIMATORS
from steinrl.rl.policy import EnsemblePolicy
from steinrl.rl.rollout import Batch, Sampler, compact

__all__ = ["SVPGAgent", "NonFiniteError", "iteration_seed", "build_policy"]


def iteration_seed(seed: int, iteration: int) -> int:
    """A 31-bit seed for iteration ``iteration`` of a run seeded ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] & 0x7FFFFFFF)


def check_finite(values: Tensor | list[Tensor | None], what: str, iteration: int) -> None:
    """Raise :class:`NonFiniteError` naming the particles whose ``values`` (each ``(M, ...)``) are not finite."""
    present = [values] if isinstance(values, Tensor) else [t for t in values if t is not None]
    ok = torch.isfinite(flatten([t.detach() for t in present])).all(1)
    if not bool(ok.all()):
        bad = torch.nonzero(~ok).flatten().tolist()
        raise NonFiniteError(f"non-finite {what} at iteration {iteration} in particle(s) {bad}")


def build_policy(cfg: Any, observation_space: gym.Space, action_space: gym.Space,
                 generator: torch.Generator | None = None) -> EnsemblePolicy:
    """The policy ensemble of ``cfg``'s method (layer family and its options)."""
    method = METHODS.get(cfg.algo.partition("-")[0])
    return EnsemblePolicy(
        cfg.particles, observation_space, action_space, cfg.policy.hidden, activation=cfg.policy.activation,
        layer=method.layer, layer_options=dict(cfg.layer), output_gain=cfg.policy.output_gain,
        normalize_obs=cfg.policy.normalize_obs, head_options=dict(cfg.policy), generator=generator,
    )


@dataclass
class UpdateStats:
    """Scalars of one update, logged under ``train/``."""

    surrogate: float
    log_prior: float
    entropy: float
    bandwidth: float
    mean_pairwise_distance: float
    kernel_mean: float
    attractive_norm: float
    repulsive_norm: float
    value_loss: float | None
    explained_variance: float | None


class SVPGAgent:
    """M policy particles, their prior, particle update, estimator and (optionally) critic.

    :param cfg: the resolved run config (:func:`steinrl.run.config.load_config`).
    :param observation_space: single-env observation space.
    :param action_space: single-env action space.
    """

    def __init__(self, cfg: Any, observation_space: gym.Space, action_space: gym.Space):
        self.cfg = cfg
        method, estimator = cfg.algo.split("-", 1)
        self.device = torch.device(cfg.device)
        init = torch.Generator().manual_seed(cfg.seed)  # draws the policy, then the critic
        self.policy = build_policy(cfg, observation_space, action_space, init).to(self.device)
        prior_options = {k: v for k, v in cfg.prior.items() if k not in ("name", "weight")}
        groups = {name: g.shape[1] for name, g in self.policy.net.prior_groups().items()}
        self.prior = make_prior(cfg.prior.name, groups, cfg.particles, **prior_options).to(self.device)
        self.estimator = ESTIMATORS.get(estimator)(**cfg.estimator)
        self.svgd = make_update(METHODS.get(method).update,
                                self.policy.kernel_parameters() + self.prior.particle_parameters(), **cfg.update)
        own = self.policy.head.own_parameters()
        self.own_opt = torch.optim.Adam(own, lr=cfg.update.lr) if own else None
        self.critic: Critic | None = None
        if self.estimator.uses_critic:
            self.critic = self._build_critic(init).to(self.device)

    def _build_critic(self, generator: torch.Generator) -> Critic:
        cfg, policy = self.cfg, self.policy
        options = {k: v for k, v in cfg.critic.items() if k != "name"}
        cls = CRITICS.get(cfg.critic.name)
        if issubclass(cls, LinearBaseline):
            return cls(cfg.particles, policy.obs_dim, **options)
        return cls(cfg.particles, policy.obs_dim, policy.obs_norm, cfg.policy.activation, generator, **options)

    # --- sampling -----------------------------------------------------------------
    def collect(self, sampler: Sampler, iteration: int) -> Batch:
        """Roll out all particles for one batch, seeded by ``(cfg.seed, iteration)``."""
        cfg, policy = self.cfg, self.policy
        seed = iteration_seed(cfg.seed, iteration)
        gen = torch.Generator(device=self.device).manual_seed(seed)
        T_max = sampler.max_steps(cfg.rollout.batch_size, cfg.rollout.sampling)
        with torch.no_grad():
            noise = policy.head.draw_noise((T_max, cfg.particles, sampler.E), gen, self.device)
            act = policy.device_actor(noise) if getattr(sampler, "device_resident", False) else policy.actor(noise)
            try:
                batch = sampler.collect(act, cfg.rollout.batch_size, mode=cfg.rollout.sampling, seed=seed)
                if hasattr(sampler, "check_finite"):
                    sampler.check_finite()
            except NonFiniteError as exc:
                raise NonFiniteError(f"{exc} at iteration {iteration}") from None
        batch = batch.to(self.device)  # one transfer per iteration (none on CPU or device-resident)
        policy.obs_norm.update(batch.obs[:-1].flatten(0, 2), batch.valid.flatten())
        return batch

    # --- update -------------------------------------------------------------------
    def update(self, batch: Batch, iteration: int) -> UpdateStats:
        """Estimator -> per-particle gradient -> particle update (-> critic fit), one batch."""
        cfg, policy = self.cfg, self.policy
        # 1. Advantages (T, M, E) of every valid step; a2c / ppo ask the critic for V(s).
        est = self.estimator.advantages(batch, self.critic)
        # 2. Each particle's valid steps compacted to (M, n, ...): the update skips padding.
        data = compact(batch, est.advantages, est.value_targets, self.device)
        old_log_prob = None
        if self.estimator.needs_old_log_prob:
            with torch.no_grad():
                old_log_prob = policy.log_prob(data.obs, data.actions)[0]
        temperature = cfg.temperature
        prior_weight = cfg.prior.weight if cfg.prior.weight is not None else 1.0 / (
            temperature * cfg.rollout.batch_size)
        lr = halved_lr(cfg.update.lr, iteration, cfg.update.lr_halving_every, cfg.update.lr_halving_start)
        for opt in (self.svgd.optimizer, self.own_opt):
            for group in opt.param_groups if opt is not None else ():
                group["lr"] = lr
        for _ in range(self.estimator.epochs):
            # 3. g_i = ∇ [ J(θ_i) / α + w log p(θ_i) ] for all particles in one backward.
            dense = policy.dense()
            log_prob, entropy = policy.log_prob(data.obs, data.actions, dense)  # (M, n), (M,)
            check_finite(log_prob, "log-probability", iteration)
            surrogate = self.estimator.surrogate(log_prob, old_log_prob, data.advantages, data.mask)  # (M,)
            log_prior = policy.log_prior(self.prior)  # (M,)
            log_target = surrogate / temperature + prior_weight * log_prior
            check_finite(log_target, "log target (surrogate / temperature + prior)", iteration)
            self.svgd.zero_grad()
            if self.own_opt is not None:
                self.own_opt.zero_grad()
            (-log_target.sum()).backward()
            particles = policy.particle_parameters() + self.prior.particle_parameters()
            check_finite([p.grad for p in particles], "gradient", iteration)
            # 4. The particle update: φ from all particles' gradients, handed to the optimizer.
            info = self.svgd.step()
            if self.own_opt is not None:
                self.own_opt.step()
            check_finite(particles, "parameter", iteration)
        # 5. The critic regresses its targets on the same samples.
        value_loss = None
        if self.critic is not None:
            value_loss = self.critic.fit(data, iteration_seed(cfg.seed, iteration) + 1)
            if not np.isfinite(value_loss):
                raise NonFiniteError(f"non-finite value loss at iteration {iteration}")
        return UpdateStats(
            surrogate=float(surrogate.detach().mean()), log_prior=float(log_prior.detach().mean()),
            entropy=float(entropy.detach().mean()), bandwidth=float(info["bandwidth"]),
            mean_pairwise_distance=float(info["mean_pairwise_distance"]), kernel_mean=float(info["kernel_mean"]),
            attractive_norm=float(info["attractive_norm"]), repulsive_norm=float(info["repulsive_norm"]),
            value_loss=value_loss,
            explained_variance=None if est.explained_variance is None else float(est.explained_variance),
        )

    # --- state --------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {"policy": self.policy.state_dict(), "prior": self.prior.state_dict(), "svgd": self.svgd.state_dict()}
        if self.own_opt is not None:
            state["own_opt"] = self.own_opt.state_dict()
        if self.critic is not None:
            state["critic"] = {"module": self.critic.state_dict(), **self.critic.extra_state()}
        return state

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.prior.load_state_dict(state["prior"])
        self.svgd.load_state_dict(state["svgd"])
        if self.own_opt is not None:
            self.own_opt.load_state_dict(state["own_opt"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"]["module"])
            self.critic.load_extra_state(state["critic"])
