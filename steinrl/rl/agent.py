"""The SVPG agent: policy particles x prior x estimator x particle update.

One iteration, :meth:`SVPGAgent.collect` then :meth:`SVPGAgent.update`:

1. materialise every particle's dense weights once, then step all ``M * E`` envs with
   one ensemble forward per step (noise pre-drawn for the whole batch);
2. the estimator turns the rollout into per-particle advantages (REINFORCE returns-to-go,
   or GAE over the critic's values);
3. one batched forward + backward gives g_i = ∇[J(θ_i) / α + w log p(θ_i)] for all
   particles, J being the estimator's surrogate (per-step mean of log π · Â for
   reinforce / a2c, the clipped ratio for ppo);
4. the particle update (SVGD, or independent) moves the particles along φ; steps 3-4 run
   once per minibatch of every particle's samples, for each of the estimator's epochs (ppo);
5. the critic, if any, is refitted (or was fitted in step 3's steps: ``critic.joint``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from functools import cache
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.core.groups import module_group, module_join, optimizer_group, optimizer_join, rows
from steinrl.core.methods import METHODS
from steinrl.core.optim import adam, gradient_step
from steinrl.core.priors import make_prior
from steinrl.core.updates import halved_lr, make_update
from steinrl.errors import NonFiniteError
from steinrl.rl.critics import CRITICS, Critic, LinearBaseline
from steinrl.rl.diagnostics import FiniteFlags, UpdateStats
from steinrl.rl.estimators import ESTIMATORS
from steinrl.rl.estimators.ppo import clip_grad_norms, minibatch_indices, take
from steinrl.rl.normalization import RewardScaler
from steinrl.rl.policy import EnsemblePolicy
from steinrl.rl.rollout import Batch, Sampler, Samples, compact

__all__ = ["SVPGAgent", "NonFiniteError", "FiniteFlags", "iteration_seed", "build_policy"]


@cache
def _overlap_pool() -> ThreadPoolExecutor:
    """The one worker thread that runs critics' regressions beside the policy updates (``critic.overlap``)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="steinrl-critic")


def iteration_seed(seed: int, iteration: int) -> int:
    """A 31-bit seed for iteration ``iteration`` of a run seeded ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] & 0x7FFFFFFF)


def build_policy(cfg: Any, observation_space: gym.Space, action_space: gym.Space,
                 generator: torch.Generator | None = None, num_particles: int | None = None) -> EnsemblePolicy:
    """The policy ensemble of ``cfg``'s method (layer family and its options); ``num_particles``
    defaults to ``cfg.particles``."""
    method = METHODS.get(cfg.algo.partition("-")[0])
    return EnsemblePolicy(
        num_particles or cfg.particles, observation_space, action_space, cfg.policy.hidden,
        activation=cfg.policy.activation, layer=method.layer, layer_options=dict(cfg.layer),
        output_gain=cfg.policy.output_gain, init=cfg.policy.init, normalize_obs=cfg.policy.normalize_obs,
        head_options=dict(cfg.policy),
        generator=generator,
    )


def _stack_particles(batched: torch.nn.Module, parts: list[torch.nn.Module]) -> None:
    """Fill ``batched`` (G·M particles) with the G modules ``parts`` (M each), in order."""
    batched.load_state_dict(module_join(batched, [part.state_dict() for part in parts]))


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

    #: reward scaling's running statistics (``estimator.scale_rewards``; built by the first update)
    reward_scaler: RewardScaler | None = None

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
        self.own_opt = adam(own, lr=cfg.update.lr, eps=cfg.update.optimizer_eps) if own else None
        self.trim = True  #: compact each particle's valid samples to the longest (set by collect)
        #: policy.obs_stats_update: a batch's observations enter the statistics after its update
        self._obs_stats_after_update = cfg.policy.obs_stats_update == "after-update"
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
            # a device task's batch keeps every particle's (T * E) columns: no host sync to trim them
            self.trim = sampler.task.host
            act = policy.actor(noise, host=sampler.task.host)
            self.finite = FiniteFlags()  #: this iteration's finiteness, checked by the job (no sync here)
            try:
                batch = sampler.collect(act, cfg.rollout.batch_size, mode=cfg.rollout.sampling, seed=seed)
            except NonFiniteError as exc:
                raise NonFiniteError(f"{exc} at iteration {iteration + 1}") from None  # counted from 1
            if sampler.action_finite is not None:  # a device task's actions, flagged by the sampler
                self.finite.add("action", sampler.action_finite)
        batch = batch.to(self.device)  # one transfer per iteration (none on CPU or device-resident)
        if not self._obs_stats_after_update:
            self._fold_obs_stats(batch)
        return batch

    def _fold_obs_stats(self, batch: Batch) -> None:
        """The batch's valid observations ``(T, M, E, obs_dim)`` into the running statistics."""
        self.policy.obs_norm.update(batch.obs[:-1].flatten(0, 2), batch.valid.flatten())

    # --- update -------------------------------------------------------------------
    def update(self, batch: Batch, iteration: int, progress: float | None = None) -> UpdateStats:
        """Estimator -> per-particle gradients -> particle updates (-> critic fit), one batch.

        Each of the estimator's ``epochs`` passes splits every particle's samples into its
        ``minibatches`` random parts (:func:`~steinrl.rl.estimators.ppo.minibatch_indices`;
        one part: the whole batch, unshuffled) and moves all particles once per part. The
        logged surrogate, entropy and PPO diagnostics are means over the last pass's steps.
        ``progress``: the fraction of the run done before this update (the job's stopping
        rule; annealing), default ``iteration / iterations``.
        """
        # 1. Advantages (T, M, E) of every valid step (of the scaled rewards with
        #    estimator.scale_rewards); a2c / ppo ask the critic for V(s).
        est = self.estimator.advantages(self._scale_rewards(batch), self.critic)
        # 2. Each particle's valid steps compacted to (M, n, ...): the update skips padding.
        data = compact(batch, est.advantages, est.value_targets, self.device, trim=self.trim)
        samples = self._update_samples(data)
        self._set_lr(iteration, progress)
        generators = [torch.Generator(device=self.device).manual_seed(iteration_seed(s, iteration) + 2)
                      for s in self.seeds]  # each seed shuffles its own particles' samples
        steps: list[dict[str, Any]] = []
        with torch.no_grad():  # the observations normalised once, not in every step's forwards
            samples["obs"] = self.policy.obs_norm(samples["obs"])
        # 5. A critic fitted on its own regresses its targets on the same samples: prepared
        #    now (it reads the observation normaliser), its steps after the policy's or, with
        #    critic.overlap, beside them on a second thread (the same numbers).
        fit = self._critic_fit(data, iteration)
        running = _overlap_pool().submit(fit) if fit is not None and getattr(self.critic, "overlap", False) else None
        try:
            with self.policy.obs_norm.bypassed():
                for epoch in range(self.estimator.epochs):
                    last = epoch == self.estimator.epochs - 1  # the logged pass
                    steps = [self._particle_step(part, iteration, last)
                             for part in self._minibatches(samples, generators)]
        finally:  # the critic is never left mid-fit (a checkpoint after an interrupt reads it)
            if running is not None:
                wait([running])
        mean = {k: torch.stack([s[k] for s in steps]).mean(0) for k in steps[-1] if k not in ("svgd", "log_prior")}
        value_loss = mean.pop("value_loss", None)
        if fit is not None:
            value_loss = running.result() if running is not None else fit()
            self.finite.add("value loss", value_loss)
        if self._obs_stats_after_update:  # the next rollout acts on statistics that include this batch
            self._fold_obs_stats(batch)
        return UpdateStats(surrogate=mean.pop("surrogate"), log_prior=steps[-1]["log_prior"],
                           entropy=mean.pop("entropy"), svgd=steps[-1]["svgd"], value_loss=value_loss,
                           explained_variance=est.explained_variance, extra=mean)

    def _critic_fit(self, data: Samples, iteration: int) -> Callable[[], Tensor] | None:
        """The critic's regression on ``data`` (:meth:`Critic.prepare_fit`), None if it has none of its own."""
        if self.critic is None or self._joint_critic():
            return None
        seeds = [iteration_seed(s, iteration) + 1 for s in self.seeds]
        return self.critic.prepare_fit(data, seeds[0] if len(seeds) == 1 else seeds)

    def _joint_critic(self) -> bool:
        """The critic is fitted in the particle updates' steps (``critic.joint``)."""
        return self.critic is not None and getattr(self.critic, "joint", False)

    def _update_samples(self, data: Samples) -> dict[str, Tensor]:
        """What every update step takes from the compacted samples, ``(M, n, ...)`` each: the
        sampling policy's log-probs and (joint critic) targets and, with value clipping, V at the rollout."""
        samples = {"obs": data.obs, "actions": data.actions, "mask": data.mask, "advantages": data.advantages}
        with torch.no_grad():
            if self.estimator.needs_old_log_prob:
                samples["old_log_prob"] = self.policy.log_prob(data.obs, data.actions)[0]
            if self._joint_critic():
                samples["targets"] = data.targets.to(torch.float32)
                if self.critic.clip_range_vf is not None:
                    samples["old_values"] = self.critic(data.obs)
        return samples

    def _minibatches(self, samples: dict[str, Tensor],
                     generators: list[torch.Generator]) -> Iterator[dict[str, Tensor]]:
        """One pass: the estimator's random minibatches of every particle's samples, ``(M, b, ...)`` each."""
        K = self.estimator.minibatches
        if K == 1:
            yield samples
            return
        idx, masks = minibatch_indices(samples["mask"], K, generators)
        for k in range(K):
            yield {**{name: take(x, idx[k]) for name, x in samples.items() if name != "mask"}, "mask": masks[k]}

    def _particle_step(self, part: dict[str, Tensor], iteration: int, logged: bool = True) -> dict[str, Any]:
        """One particle update (and joint critic step) on ``part``, the batch or a minibatch;
        ``logged``: a step of the pass whose means are logged (else the prior, when its weight
        is 0, and the PPO diagnostics, which only feed the log, are not computed)."""
        policy, est = self.policy, self.estimator
        # 3. g_i = ∇ [ J(θ_i) / α + w log p(θ_i) ] for all particles in one backward.
        ent_coef = est.option("ent_coef", 0.0)
        # a categorical entropy over the real samples only where the recipe's options are on (the
        # default logs the pre-minibatch number: the mean over all compacted columns, padding included)
        mask = part["mask"] if ent_coef or est.minibatches > 1 else None
        log_prob, entropy = policy.head.log_prob(policy.outputs(part["obs"], policy.dense()), part["actions"], mask)
        self.finite.add("log-probability", log_prob)
        old = part.get("old_log_prob")
        surrogate = est.surrogate(log_prob, old, part["advantages"], part["mask"])  # (M,)
        objective = surrogate + ent_coef * entropy if ent_coef else surrogate
        log_prior = policy.log_prior(self.prior) if logged or self._prior_weight() else None  # (M,)
        value_loss = None
        if self._joint_critic():
            value_loss = self.critic.value_loss(part["obs"], part["targets"], part["mask"], part.get("old_values"))
            self.finite.add("value loss", value_loss)
        critic_opt = self.critic.optimizer if value_loss is not None else None
        particles = policy.particle_parameters() + self.prior.particle_parameters()
        grad_norm = None

        def backward() -> None:
            nonlocal grad_norm
            grad_norm = self._backward(objective, log_prior, value_loss, iteration)

        # 4. The particle update: φ from all particles' gradients, handed to the optimizer
        #    (then the head's own and a joint critic's steps): core.optim's one step.
        info = gradient_step(backward, [self.svgd, self.own_opt, critic_opt],
                             on_gradients=lambda: self.finite.add("gradient", [p.grad for p in particles]))
        self.finite.add("parameter", particles)
        step = {"surrogate": surrogate.detach(), "entropy": entropy.detach(), "svgd": info,
                "log_prior": None if log_prior is None else log_prior.detach(),
                **(est.diagnostics(log_prob.detach(), old, part["mask"]) if old is not None and logged else {})}
        if value_loss is not None:
            step["value_loss"] = value_loss.detach()
        if grad_norm is not None:
            step["grad_norm"] = grad_norm
        return step

    def _backward(self, objective: Tensor, log_prior: Tensor, value_loss: Tensor | None,
                  iteration: int) -> Tensor | None:
        """Gradients of −[J/α + w log p] (+ vf_coef · value loss, joint critic) into ``p.grad``.

        With ``estimator.max_grad_norm`` the gradient of J (and of the weighted value loss)
        is clipped per particle first, in J's own units (SB3's clipping at M = 1), then
        divided by α, and the prior's gradient added. Returns the norms before clipping ``(M,)``.
        """
        temperature, prior_weight = self.cfg.temperature, self._prior_weight()
        max_norm = self.estimator.option("max_grad_norm")
        value_term = None if value_loss is None else self.critic.vf_coef * value_loss.sum()
        if max_norm is None:
            log_target = objective / temperature  # (+ w log p; with w = 0 it would add exact zeros)
            log_target = log_target + prior_weight * log_prior if prior_weight else log_target
            self.finite.add("log target (surrogate / temperature + prior)", log_target)
            loss = -log_target.sum()
            (loss if value_term is None else loss + value_term).backward()
            return None
        self.finite.add("objective", objective)
        loss = -objective.sum()
        (loss if value_term is None else loss + value_term).backward()
        policy_params = self.policy.particle_parameters()
        norms = clip_grad_norms(policy_params + (list(self.critic.net.parameters()) if value_term is not None else []),
                                max_norm)
        with torch.no_grad():
            torch._foreach_div_([p.grad for p in policy_params if p.grad is not None], temperature)
        if prior_weight:
            (-(prior_weight * log_prior).sum()).backward()
        return norms

    def _prior_weight(self) -> float:
        """w of the log target J / α + w log p(θ): ``prior.weight``, default 1 / (α · batch_size)."""
        cfg = self.cfg
        return cfg.prior.weight if cfg.prior.weight is not None else 1.0 / (cfg.temperature * cfg.rollout.batch_size)

    def _lr_fraction(self, iteration: int, progress: float | None) -> float:
        """The fraction of the configured step sizes used at ``iteration``: with
        ``estimator.anneal_lr``, 1 − progress, the fraction of the run done before this
        update (iteration / iterations, or env steps / total_steps: linear to 0 over the run,
        as CleanRL: the full lr at the first update), else 1."""
        if not self.estimator.option("anneal_lr", False):
            return 1.0
        done = iteration / self.cfg.iterations if progress is None else progress
        return max(0.0, 1.0 - done)

    def _set_lr(self, iteration: int, progress: float | None = None) -> None:
        """Every optimizer's step size at ``iteration`` (halving schedule, annealing)."""
        cfg = self.cfg
        fraction = self._lr_fraction(iteration, progress)
        lr = halved_lr(cfg.update.lr, iteration, cfg.update.lr_halving_every, cfg.update.lr_halving_start) * fraction
        for opt in (self.svgd.optimizer, self.own_opt):
            for group in opt.param_groups if opt is not None else ():
                group["lr"] = lr
        if self.estimator.option("anneal_lr", False) and hasattr(self.critic, "optimizer"):
            for group in self.critic.optimizer.param_groups:
                group["lr"] = cfg.critic.lr * fraction

    def _scale_rewards(self, batch: Batch) -> Batch:
        """``batch`` with its rewards scaled by the running return std (``estimator.scale_rewards``), else itself."""
        if not self.estimator.option("scale_rewards", False):
            return batch
        if self.reward_scaler is None:
            self.reward_scaler = self._new_reward_scaler()
        return self.reward_scaler.scale_batch(batch)

    def _new_reward_scaler(self) -> RewardScaler:
        est = self.estimator
        return RewardScaler(len(self.seeds), est.option("discount"), est.option("reward_clip"), device=self.device)

    # --- state --------------------------------------------------------------------
    def state_dict(self, group: int = 0) -> dict:
        """Seed ``group``'s state, in the single-seed format whatever the number of seeds
        (what has a particle axis is declared: :mod:`steinrl.core.groups`)."""
        G = len(self.seeds)
        svgd = optimizer_group(self.svgd.optimizer, group, G)
        if self.svgd.prev_theta is not None:
            svgd = {**svgd, "prev_theta": rows(self.svgd.prev_theta, group, G)}
        state = {"policy": module_group(self.policy, group, G), "prior": module_group(self.prior, group, G),
                 "svgd": svgd}
        if self.own_opt is not None:
            state["own_opt"] = optimizer_group(self.own_opt, group, G)
        if self.critic is not None:
            extra = self.critic.extra_state()
            if "optimizer" in extra:
                extra = {**extra, "optimizer": optimizer_group(self.critic.optimizer, group, G)}
            state["critic"] = {"module": module_group(self.critic, group, G), **extra}
        if self.reward_scaler is not None:
            state["reward_scaler"] = self.reward_scaler.state_dict(group, G)
        return state

    def load_state_dict(self, states: list[dict] | dict) -> None:
        """Continue from one :meth:`state_dict` per seed (a single dict: one seed)."""
        states = [states] if isinstance(states, dict) else list(states)
        if len(states) != len(self.seeds):
            raise ValueError(f"{len(self.seeds)} seed(s) need as many states, got {len(states)}")
        self.policy.load_state_dict(module_join(self.policy, [s["policy"] for s in states]))
        self.prior.load_state_dict(module_join(self.prior, [s["prior"] for s in states]))
        svgd = [dict(s["svgd"]) for s in states]
        prev = [s.pop("prev_theta", None) for s in svgd]
        self.svgd.load_state_dict({**optimizer_join(self.svgd.optimizer, svgd),
                                   **({"prev_theta": torch.cat(prev)} if prev[0] is not None else {})})
        if self.own_opt is not None:
            self.own_opt.load_state_dict(optimizer_join(self.own_opt, [s["own_opt"] for s in states]))
        if self.critic is not None:
            critic = [s["critic"] for s in states]
            self.critic.load_state_dict(module_join(self.critic, [c["module"] for c in critic]))
            extra = dict(critic[0])
            if "optimizer" in extra:
                extra["optimizer"] = optimizer_join(self.critic.optimizer, [c["optimizer"] for c in critic])
            self.critic.load_extra_state(extra)
        if "reward_scaler" in states[0]:
            self.reward_scaler = self._new_reward_scaler()
            self.reward_scaler.load_state_dict([s["reward_scaler"] for s in states])
