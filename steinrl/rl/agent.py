"""The SVPG agent: the container an estimator's update reads.

:class:`SVPGAgent` holds M policy particles and their prior, the particle optimizer that moves
them (:class:`~steinrl.core.particle_optimizer.ParticleOptimizer`: g_i = clip(∇J_i)/α + w ∇log p(θ_i),
the Stein or independent direction, the optimizer), the critic, the iteration's random numbers
(:class:`~steinrl.rl.draws.Draws`, the job's), the finiteness flags of the iteration, the
observation statistics and the saved state of every part. It rolls the particles out
(:meth:`SVPGAgent.collect`); the estimator's own ``learn`` (:mod:`steinrl.rl.estimators`) reads it
and moves the particles by the one particle step, ``agent.optimizer.step``.

Seeds can be trained as one batch (G seeds as G·M particles): every random stream is per seed
(:meth:`~steinrl.rl.draws.Draws.generators`), and the kernel couples particles within their seed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.core.finite import FiniteFlags
from steinrl.core.groups import module_group, module_join, optimizer_group, optimizer_join, rows
from steinrl.core.methods import METHODS
from steinrl.core.particle_optimizer import ParticleOptimizer, halved_lr, make_particle_optimizer, set_lr
from steinrl.core.priors import make_prior
from steinrl.errors import NonFiniteError
from steinrl.rl.critics import CRITICS, Critic, LinearBaseline
from steinrl.rl.draws import Draws
from steinrl.rl.policy import EnsemblePolicy
from steinrl.rl.rollout import Batch, Sampler

__all__ = ["SVPGAgent", "build_policy"]


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


def prior_weight(cfg: Any) -> float:
    """w of the log target J / α + w log p(θ): ``prior.weight``, default 1 / (α · batch_size)."""
    return cfg.prior.weight if cfg.prior.weight is not None else 1.0 / (cfg.temperature * cfg.rollout.batch_size)


class SVPGAgent:
    """M policy particles, their prior, particle optimizer, estimator and (optionally) critic.

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
        est = ESTIMATORS.get(estimator)
        self.estimator = est(est.Settings(**cfg.estimator), groups=G, device=self.device)
        self.finite = FiniteFlags()  #: this iteration's finiteness, checked by the job (no sync here)
        self.draws = Draws(self._seed_of)  #: every random number of an iteration (rl/draws.py)
        self.optimizer: ParticleOptimizer = make_particle_optimizer(
            METHODS.get(method).update, self.policy.kernel_parameters() + self.prior.particle_parameters(),
            cfg.update, groups=G, temperature=cfg.temperature, prior_weight=prior_weight(cfg),
            log_prior=lambda: self.policy.log_prior(self.prior), own=self.policy.head.own_parameters(),
            max_grad_norm=self.estimator.max_grad_norm, finite=self.finite)
        # (the embedding's B <= M x rollout.batch_size: checked with the config, PolicyGradientJob.check_config)
        #: the shared states of the particles' embedding ``(G·M, B, obs_dim)`` (normalised; drawn each
        #: update where the particle update asks for outputs: a function-space kernel, a spread controller)
        self.shared_states: Tensor | None = None
        self.trim = True  #: compact each particle's valid samples to the longest (set by collect)
        #: policy.obs_stats_update: a batch's observations enter the statistics after its update
        self._obs_stats_after_update = cfg.policy.obs_stats_update == "after-update"
        self.critic: Critic | None = None
        if est.uses_critic:
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

    @property
    def joint_critic(self) -> bool:
        """The critic is fitted in the particle steps (``critic.joint``), not by a fit of its own."""
        return self.critic is not None and getattr(self.critic, "joint", False)

    def generators(self, iteration: int, offset: int) -> list[torch.Generator]:
        """One device generator per seed for a random stream of ``iteration`` (``offset`` tells
        the streams apart: 0 the rollout, 1 the critic's fit, 2 the minibatches, 3 the
        function-space kernel's states)."""
        return [torch.Generator(device=self.device).manual_seed(iteration_seed(s, iteration) + offset)
                for s in self.seeds]

    def _seed_of(self, iteration: int) -> int | list[int]:
        """The rollout's reset seed of ``iteration``: one per seed (a single int for one seed)."""
        seeds = [iteration_seed(s, iteration) for s in self.seeds]  # each seed's own streams
        return seeds[0] if len(seeds) == 1 else seeds

    # --- sampling -----------------------------------------------------------------
    def collect(self, sampler: Sampler, iteration: int) -> Batch:
        """Roll out all particles for one batch, seeded by ``(cfg.seed, iteration)``; every random
        number through :attr:`draws` (the policy's noise: ``"noise"``)."""
        cfg, policy, M, E = self.cfg, self.policy, self.cfg.particles, sampler.E
        T_max = sampler.max_steps(cfg.rollout.batch_size, cfg.rollout.sampling)
        self.draws.begin(iteration)

        def draw_noise(it: int) -> Tensor:  # (T, G·M, E, out_dim), each seed's block from its own stream
            return torch.cat([policy.head.draw_noise((T_max, M, E), g, self.device)
                              for g in self.generators(it, 0)], dim=1)

        with torch.no_grad():
            noise = self.draws("noise", draw_noise)
            seed = self._seed_of(iteration)
            # a device task's batch keeps every particle's (T * E) columns: no host sync to trim them
            self.trim = sampler.task.host
            act = policy.actor(noise, host=sampler.task.host)
            self.finite.clear()
            try:
                batch = sampler.collect(act, cfg.rollout.batch_size, mode=cfg.rollout.sampling, seed=seed,
                                        draws=None if sampler.task.host else self.draws)
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
        """:meth:`prepare` the step sizes, then :meth:`learn` from ``batch``. ``progress``: the
        fraction of the run done before this update (the job's stopping rule; annealing),
        default ``iteration / iterations``."""
        self.prepare(iteration, progress)
        return self.learn(batch, iteration)

    def prepare(self, iteration: int, progress: float | None = None) -> None:
        """Every optimizer's step size for ``iteration``'s update: ``update.lr`` on the halving
        schedule (``update.lr_halving_every``) and ``critic.lr``, each times the estimator's
        :meth:`~steinrl.rl.estimators.Estimator.lr_fraction` (annealing). Host values only: a
        replayed graph of the update reads them (tensor step sizes are written in place)."""
        done = iteration / self.cfg.iterations if progress is None else progress
        fraction, update = self.estimator.lr_fraction(done), self.cfg.update
        if self.optimizer.update.repulsion is not None:  # a controller's per-iteration choice (the bandit's λ)
            self.optimizer.update.repulsion.start(iteration, self.seeds)
        self.optimizer.set_lr(halved_lr(update.lr, iteration, update.lr_halving_every, update.lr_halving_start)
                              * fraction)
        if hasattr(self.critic, "optimizer"):
            set_lr(self.critic.optimizer, self.cfg.critic.lr * fraction)

    def learn(self, batch: Batch, iteration: int) -> UpdateStats:
        """The estimator's update on ``batch`` (:meth:`~steinrl.rl.estimators.Estimator.update`),
        then (``policy.obs_stats_update: after-update``) the batch's observations into the statistics."""
        stats = self.estimator.update(self, batch, iteration)
        if self._obs_stats_after_update:  # the next rollout acts on statistics that include this batch
            self._fold_obs_stats(batch)
        return stats

    # --- what the estimators' updates call ----------------------------------------------

    def samples(self, batch: Batch, advantages: Advantages, iteration: int,
                old_log_prob: bool = False) -> tuple[Samples, dict[str, Tensor]]:
        """Every particle's valid steps compacted to ``(M, n, ...)`` (the update skips padding):
        the :class:`~steinrl.rl.rollout.Samples` (raw observations, for a critic's fit) and what
        the particle steps take, ``obs`` (normalised once, not in every step's forwards),
        ``actions``, ``mask``, ``advantages``; with ``old_log_prob`` the sampling policy's
        log-probs; with a joint critic its ``targets`` and (value clipping) ``old_values``. The
        embedding's shared states are drawn from them (:meth:`_share_states`)."""
        data = compact(batch, advantages.advantages, advantages.value_targets, self.device, trim=self.trim)
        samples = {"obs": data.obs, "actions": data.actions, "mask": data.mask, "advantages": data.advantages}
        with torch.no_grad():
            if old_log_prob:
                samples["old_log_prob"] = self.policy.log_prob(data.obs, data.actions)[0]
            if self.joint_critic:
                samples["targets"] = data.targets.to(torch.float32)
                if self.critic.clip_range_vf is not None:
                    samples["old_values"] = self.critic(data.obs)
            samples["obs"] = self.policy.obs_norm(samples["obs"])
            self._share_states(samples, iteration)
        return data, samples

    def _share_states(self, samples: dict[str, Tensor], iteration: int) -> None:
        """The B shared states of the particles' embedding (a function-space kernel's, a spread
        controller's), drawn for each seed from all its particles' samples (uniformly without
        replacement among the real ones: the B smallest of uniform keys, real samples first, so
        padding only where they run out) and shared by every particle of the seed; the particle
        step then sees each particle's action distribution on them (:meth:`embed`)."""
        B = self.optimizer.update.embedding_states
        if not B:
            return
        obs, mask, M = samples["obs"], samples["mask"], self.cfg.particles
        G, n, d = len(self.seeds), *obs.shape[1:]

        def draw_keys(it: int) -> Tensor:  # (G, M n): each seed's own draw
            return torch.stack([torch.rand(M * n, generator=g, device=self.device) for g in self.generators(it, 3)])

        keys = self.draws("function_keys", draw_keys)
        order = torch.argsort(torch.where(mask.reshape(G, M * n) > 0, keys, keys + 2.0), dim=1)[:, :B]  # (G, B)
        picked = torch.gather(obs.reshape(G, M * n, d), 1, order[..., None].expand(G, B, d))  # (G, B, d)
        self.shared_states = picked[:, None].expand(G, M, B, d).reshape(G * M, B, d)

    def embed(self) -> Tensor:
        """Every particle's outputs on the shared states ``(G·M, B, k)`` (its action distribution's
        parameters in the kernel: :meth:`~steinrl.rl.heads.Head.function`), differentiable."""
        policy = self.policy
        return policy.head.function(policy.outputs(self.shared_states, policy.dense()))

    def critic_fit(self, data: Samples, iteration: int) -> CriticFit:
        """The critic's fit of its own on ``data`` as a context around the policy's steps
        (:class:`~steinrl.rl.critics.CriticFit`); none for a joint critic or none at all. Its
        random regression columns come through :attr:`draws` (``"critic_columns"``)."""
        critic = None if self.critic is None or self.joint_critic else self.critic
        columns = None
        if critic is not None and critic.samples_columns(data.mask.shape[1]):
            n = data.mask.shape[1]
            columns = self.draws("critic_columns", lambda it: critic.draw_columns(n, self.generators(it, 1)))
        return CriticFit(critic, data, columns, self.finite)

    def shuffle_keys(self, epochs: int, n: int) -> Tensor:
        """Uniform keys ``(epochs, G·M, n)`` that shuffle every particle's ``n`` samples into
        minibatches (:func:`~steinrl.rl.minibatches.minibatch_indices`), epoch after epoch, each
        seed's from its own stream, through :attr:`draws` (``"minibatch_keys"``)."""
        M = self.cfg.particles

        def draw_keys(it: int) -> Tensor:  # drawn (n, M) and transposed: column j's key is the same for any n > j
            gens = self.generators(it, 2)
            return torch.stack([torch.cat([torch.rand((n, M), generator=g, device=self.device).T for g in gens])
                                for _ in range(epochs)])

        return self.draws("minibatch_keys", draw_keys)

    def log_prob(self, part: dict[str, Tensor], entropy_mask: bool = False) -> tuple[Tensor, Tensor]:
        """log π_θi(a|s) ``(M, b)`` of the part's (normalised) samples and each particle's mean
        entropy ``(M,)`` (over its real samples with ``entropy_mask``, else every column)."""
        policy = self.policy
        mask = part["mask"] if entropy_mask else None
        log_prob, entropy = policy.head.log_prob(policy.outputs(part["obs"], policy.dense()), part["actions"], mask)
        self.finite.add("log-probability", log_prob)
        return log_prob, entropy

    def step(self, objective: Tensor, part: dict[str, Tensor], logged: bool = True) -> dict[str, Any]:
        """One particle step from J ``(M,)`` (:meth:`ParticleOptimizer.step`), a joint critic's
        value loss on the same samples alongside (its gradient weighted by ``vf_coef``, clipped
        with J's). Returns the step's logged values: ``direction``, ``log_prior`` and, where
        present, ``value_loss`` and ``grad_norm`` ``(M,)``."""
        aux: dict[str, Any] = {}
        value_loss = None
        if self.joint_critic:
            critic = self.critic
            value_loss = critic.value_loss(part["obs"], part["targets"], part["mask"], part.get("old_values"))
            self.finite.add("value loss", value_loss)
            aux = {"aux_loss": critic.vf_coef * value_loss.sum(), "aux_params": list(critic.net.parameters()),
                   "aux_optimizer": critic.optimizer}
        embed = self.embed if self.shared_states is not None else None
        result = self.optimizer.step(objective, embed=embed, logged=logged, **aux)
        step = {"direction": result.direction, "log_prior": result.log_prior}
        if value_loss is not None:
            step["value_loss"] = value_loss.detach()
        if result.grad_norm is not None:
            step["grad_norm"] = result.grad_norm
        return step

    def make_capturable(self) -> None:
        """Every optimizer safe to capture in a CUDA graph (:func:`steinrl.rl.graph.capturable`):
        step counts on the device, step sizes device tensors written in place. A critic's fit
        then runs on the iterating thread (``critic.overlap`` off: the same numbers), since a
        capture records that thread's stream only."""
        from steinrl.rl.graph import capturable

        for opt in (self.optimizer.optimizer, self.optimizer.own_optimizer, getattr(self.critic, "optimizer", None)):
            if opt is not None:
                capturable(opt)
        if getattr(self.critic, "overlap", False):
            self.critic.overlap = False

    # --- state --------------------------------------------------------------------
    def state_dict(self, group: int = 0) -> dict:
        """Seed ``group``'s state, in the single-seed format whatever the number of seeds
        (what has a particle axis is declared: :mod:`steinrl.core.groups`)."""
        G = len(self.seeds)
        particle_optimizer = {"optimizer": optimizer_group(self.optimizer.optimizer, group, G)}
        if self.optimizer.own_optimizer is not None:
            particle_optimizer["own_optimizer"] = optimizer_group(self.optimizer.own_optimizer, group, G)
        if self.optimizer.prev_theta is not None:
            particle_optimizer["prev_theta"] = rows(self.optimizer.prev_theta, group, G)
        state = {"policy": module_group(self.policy, group, G), "prior": module_group(self.prior, group, G),
                 "particle_optimizer": particle_optimizer, **self.estimator.state_dict(group, G)}
        repulsion = self.optimizer.update.repulsion
        if repulsion is not None and repulsion.state_dict(group, G):
            state["repulsion"] = repulsion.state_dict(group, G)
        if self.critic is not None:
            extra = self.critic.extra_state()
            if "optimizer" in extra:
                extra = {**extra, "optimizer": optimizer_group(self.critic.optimizer, group, G)}
            state["critic"] = {"module": module_group(self.critic, group, G), **extra}
        return state

    def load_state_dict(self, states: list[dict] | dict) -> None:
        """Continue from one :meth:`state_dict` per seed (a single dict: one seed). A checkpoint of
        steinrl 0.2 (``svgd`` and ``own_opt`` entries) loads too."""
        states = [_upgrade(s) for s in ([states] if isinstance(states, dict) else list(states))]
        if len(states) != len(self.seeds):
            raise ValueError(f"{len(self.seeds)} seed(s) need as many states, got {len(states)}")
        self.policy.load_state_dict(module_join(self.policy, [s["policy"] for s in states]))
        self.prior.load_state_dict(module_join(self.prior, [s["prior"] for s in states]))
        parts = [s["particle_optimizer"] for s in states]
        prev = [p.get("prev_theta") for p in parts]
        joined = {"optimizer": optimizer_join(self.optimizer.optimizer, [p["optimizer"] for p in parts])}
        if self.optimizer.own_optimizer is not None:
            joined["own_optimizer"] = optimizer_join(self.optimizer.own_optimizer, [p["own_optimizer"] for p in parts])
        if prev[0] is not None:
            joined["prev_theta"] = torch.cat(prev)
        self.optimizer.load_state_dict(joined)
        if self.optimizer.update.repulsion is not None and "repulsion" in states[0]:
            self.optimizer.update.repulsion.load_state_dict([s["repulsion"] for s in states])
        if self.critic is not None:
            critic = [s["critic"] for s in states]
            self.critic.load_state_dict(module_join(self.critic, [c["module"] for c in critic]))
            extra = dict(critic[0])
            if "optimizer" in extra:
                extra["optimizer"] = optimizer_join(self.critic.optimizer, [c["optimizer"] for c in critic])
            self.critic.load_extra_state(extra)
        self.estimator.load_state_dict(states)


def _upgrade(state: dict) -> dict:
    """A seed's agent state in today's layout: steinrl 0.2 saved the particle optimizer's torch
    state under ``svgd`` (with ``prev_theta`` inside) and the own parameters' Adam under ``own_opt``."""
    if "svgd" not in state:
        return state
    state = dict(state)
    old = dict(state.pop("svgd"))
    part = {"optimizer": {k: v for k, v in old.items() if k != "prev_theta"}}
    if "prev_theta" in old:
        part["prev_theta"] = old["prev_theta"]
    if "own_opt" in state:
        part["own_optimizer"] = state.pop("own_opt")
    state["particle_optimizer"] = part
    return state

