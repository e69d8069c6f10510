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
                 generator: torch.Generator | None = None, num_particles: int | None = None) -> EnsemblePolicy:
    """The policy ensemble of ``cfg``'s method (layer family and its options); ``num_particles``
    defaults to ``cfg.particles``."""
    method = METHODS.get(cfg.algo.partition("-")[0])
    return EnsemblePolicy(
        num_particles or cfg.particles, observation_space, action_space, cfg.policy.hidden,
        activation=cfg.policy.activation, layer=method.layer, layer_options=dict(cfg.layer),
        output_gain=cfg.policy.output_gain, normalize_obs=cfg.policy.normalize_obs, head_options=dict(cfg.policy),
        generator=generator,
    )


@dataclass
class UpdateStats:
    """One update's diagnostics as tensors: per particle ``(M,)`` or per group ``(G,)`` / 0-dim."""

    surrogate: Tensor  # (M,)
    log_prior: Tensor  # (M,)
    entropy: Tensor  # (M,)
    svgd: dict[str, Tensor]  # bandwidth, kernel_mean, ...: (G,) or 0-dim
    value_loss: Tensor | None  # (M,)
    explained_variance: Tensor | None  # (M,), NaN where the targets are constant

    def per_group(self, groups: int = 1) -> list[dict[str, float]]:
        """The scalars logged under ``train/``, one dict per group of particles (seed)."""
        columns = {"surrogate": self.surrogate, "log_prior": self.log_prior, "entropy": self.entropy}
        if self.value_loss is not None:
            columns["value_loss"] = self.value_loss
        rows = {k: v.detach().view(groups, -1).mean(1) for k, v in columns.items()}
        if self.explained_variance is not None:
            rows["explained_variance"] = self.explained_variance.view(groups, -1).nanmean(1)
        rows.update({k: v.detach().reshape(-1).expand(groups) for k, v in self.svgd.items()})
        table = torch.stack([v.double().cpu() for v in rows.values()], 1).tolist()  # one transfer
        return [dict(zip(rows, values)) for values in table]


def _stack_particles(batched: torch.nn.Module, parts: list[torch.nn.Module]) -> None:
    """Fill ``batched`` (G·M particles) with the G modules ``parts`` (M each), in order;
    state that is not per particle (e.g. observation statistics) is taken from the first."""
    states = [part.state_dict() for part in parts]
    with torch.no_grad():
        for name, tensor in batched.state_dict().items():
            pieces = [state[name] for state in states]
            if tensor.dim() and tensor.shape[0] == sum(p.shape[0] for p in pieces) and len(parts) > 1:
                tensor.copy_(torch.cat(pieces))
            else:
                tensor.copy_(pieces[0])


class SVPGAgent:
    """M policy particles, their prior, particle update, estimator and (optionally) critic.

    :param cfg: the resolved run config (:func:`steinrl.run.config.load_config`).
    :param observation_space: single-env observation space.
    :param action_space: single-env action space.
    :param seeds: G seeds trained as one batch of G·M particles (None: ``cfg.seed`` alone).
        Each seed's particles are initialised, sampled and fitted with its own random
        streams and coupled by the kernel only among themselves, so its run is that of the
        seed alone (to float rounding).
    """

    def __init__(self, cfg: Any, observation_space: gym.Space, action_space: gym.Space,
                 seeds: list[int] | None = None):
        self.cfg = cfg
        self.seeds = [cfg.seed] if seeds is None else list(seeds)
        G, M = len(self.seeds), cfg.particles
        method, estimator = cfg.algo.split("-", 1)
        self.device = torch.device(cfg.device)
        inits = [torch.Generator().manual_seed(s) for s in self.seeds]  # each draws its policy, then its critic
        if G == 1:
            self.policy = build_policy(cfg, observation_space, action_space, inits[0])
        else:
            self.policy = build_policy(cfg, observation_space, action_space, torch.Generator(), G * M)
            _stack_particles(self.policy, [build_policy(cfg, observation_space, action_space, g) for g in inits])
        self.policy.to(self.device)
        prior_options = {k: v for k, v in cfg.prior.items() if k not in ("name", "weight")}
        groups = {name: g.shape[1] for name, g in self.policy.net.prior_groups().items()}
        self.prior = make_prior(cfg.prior.name, groups, G * M, **prior_options).to(self.device)
        self.estimator = ESTIMATORS.get(estimator)(**cfg.estimator)
        self.svgd = make_update(METHODS.get(method).update,
                                self.policy.kernel_parameters() + self.prior.particle_parameters(), groups=G,
                                **cfg.update)
        own = self.policy.head.own_parameters()
        self.own_opt = torch.optim.Adam(own, lr=cfg.update.lr) if own else None
        self.trim = True  #: compact each particle's valid samples to the longest (set by collect)
        self.critic: Critic | None = None
        if self.estimator.uses_critic:
            critics = [self._build_critic(g, M) for g in inits]
            self.critic = critics[0] if G == 1 else self._build_critic(torch.Generator(), G * M)
            if G > 1:
                _stack_particles(self.critic, critics)
            self.critic.to(self.device)

    def _build_critic(self, generator: torch.Generator, num_particles: int) -> Critic:
        cfg, policy = self.cfg, self.policy
        options = {k: v for k, v in cfg.critic.items() if k != "name"}
        cls = CRITICS.get(cfg.critic.name)
        if issubclass(cls, LinearBaseline):
            return cls(num_particles, policy.obs_dim, **options)
        return cls(num_particles, policy.obs_dim, policy.obs_norm, cfg.policy.activation, generator, **options)

    # --- sampling -----------------------------------------------------------------
    def collect(self, sampler: Sampler, iteration: int) -> Batch:
        """Roll out all particles for one batch, seeded by ``(cfg.seed, iteration)``."""
        cfg, policy = self.cfg, self.policy
        seeds = [iteration_seed(s, iteration) for s in self.seeds]  # each seed's own streams
        T_max = sampler.max_steps(cfg.rollout.batch_size, cfg.rollout.sampling)
        with torch.no_grad():
            noise = torch.cat([policy.head.draw_noise((T_max, cfg.particles, sampler.E),
                                                      torch.Generator(device=self.device).manual_seed(s), self.device)
                               for s in seeds], dim=1)
            seed = seeds[0] if len(seeds) == 1 else seeds
            # a device-resident rollout keeps every particle's (T * E) columns: no host sync to trim them
            self.trim = not sampler.device_resident
            act = (policy.device_actor(noise, sample=self._compiled_sample()) if sampler.device_resident
                   else policy.actor(noise))
            try:
                batch = sampler.collect(act, cfg.rollout.batch_size, mode=cfg.rollout.sampling, seed=seed)
                if hasattr(sampler, "check_finite"):
                    sampler.check_finite()
            except NonFiniteError as exc:
                raise NonFiniteError(f"{exc} at iteration {iteration}") from None
        batch = batch.to(self.device)  # one transfer per iteration (none on CPU or device-resident)
        policy.obs_norm.update(batch.obs[:-1].flatten(0, 2), batch.valid.flatten())
        return batch

    def _compiled_sample(self) -> Any:
        """``torch.compile(policy.sample)`` when ``rollout.compile`` is on (built once), else None."""
        if not self.cfg.rollout.compile:
            return None
        if getattr(self, "_compiled", None) is None:
            mode = "reduce-overhead" if torch.device(self.device).type == "cuda" else None
            self._compiled = torch.compile(self.policy.sample, mode=mode, dynamic=False)
        return self._compiled

    # --- update -------------------------------------------------------------------
    def update(self, batch: Batch, iteration: int) -> UpdateStats:
        """Estimator -> per-particle gradient -> particle update (-> critic fit), one batch."""
        cfg, policy = self.cfg, self.policy
        # 1. Advantages (T, M, E) of every valid step; a2c / ppo ask the critic for V(s).
        est = self.estimator.advantages(batch, self.critic)
        # 2. Each particle's valid steps compacted to (M, n, ...): the update skips padding.
        data = compact(batch, est.advantages, est.value_targets, self.device, trim=self.trim)
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
            critic_seeds = [iteration_seed(s, iteration) + 1 for s in self.seeds]
            value_loss = self.critic.fit(data, critic_seeds[0] if len(critic_seeds) == 1 else critic_seeds)
            check_finite(value_loss[:, None], "value loss", iteration)
        return UpdateStats(surrogate=surrogate.detach(), log_prior=log_prior.detach(), entropy=entropy.detach(),
                           svgd=info, value_loss=value_loss, explained_variance=est.explained_variance)

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
