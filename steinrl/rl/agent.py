"""The SVPG agent: the container an estimator's update reads.

:class:`SVPGAgent` holds M policy particles and their prior, the particle optimizer that moves
them (:class:`~steinrl.core.particle_optimizer.ParticleOptimizer`: g_i = clip(∇J_i)/α + w ∇log p(θ_i),
the Stein or independent direction, the optimizer), the critic, the iteration's random numbers
(:class:`~steinrl.rl.draws.Draws`, the job's), the finiteness flags of the iteration, the
observation statistics and the saved state of every part. It rolls the particles out
(:meth:`SVPGAgent.collect`); the estimator's own ``learn`` (:mod:`steinrl.rl.estimators`) reads it
and moves the particles by the one particle step, ``agent.particle_optimizer.step``.

Seeds can be trained as one batch (G seeds as G·M particles): every random stream is per seed
(:meth:`~steinrl.rl.draws.Draws.generators`), and the kernel couples particles within their seed.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import Tensor

from steinrl.core.finite import FiniteFlags
from steinrl.core.groups import module_group, module_join, optimizer_group, optimizer_join, rows
from steinrl.core.methods import METHODS
from steinrl.core.particle_optimizer import ParticleOptimizer, make_particle_optimizer
from steinrl.core.priors import make_prior
from steinrl.errors import NonFiniteError
from steinrl.registry import settings_values
from steinrl.rl.critics import CRITICS, Critic, LinearBaseline
from steinrl.rl.draws import Draws
from steinrl.rl.heads import head_for
from steinrl.rl.policy import EnsemblePolicy
from steinrl.rl.rollout import Batch, Sampler
from steinrl.rl.settings import RLConfig

__all__ = ["SVPGAgent", "build_policy"]


def build_policy(cfg: RLConfig, observation_space: gym.Space, action_space: gym.Space,
                 generator: torch.Generator | None = None, num_particles: int | None = None) -> EnsemblePolicy:
    """The policy ensemble of ``cfg``'s method (layer family and its ``layer`` settings, the
    ``policy`` section and its head's own settings); ``num_particles`` defaults to ``cfg.particles``."""
    method = METHODS.get(cfg.algo.partition("-")[0])
    policy = cfg.policy
    return EnsemblePolicy(
        num_particles or cfg.particles, observation_space, action_space, policy.hidden,
        activation=policy.activation, layer=method.layer, layer_options=settings_values(cfg.layer),
        output_gain=policy.output_gain, init=policy.init, normalize_obs=policy.normalize_obs,
        head_options=settings_values(policy, head_for(action_space).Settings),
        generator=generator,
    )


def _stack_particles(batched: torch.nn.Module, parts: list[torch.nn.Module]) -> None:
    """Fill ``batched`` (G·M particles) with the G modules ``parts`` (M each), in order."""
    batched.load_state_dict(module_join(batched, [part.state_dict() for part in parts]))


def prior_weight(cfg: RLConfig) -> float:
    """w of the log target J / α + w log p(θ): ``prior.weight``, default 1 / (α · batch_size)."""
    return cfg.prior.weight if cfg.prior.weight is not None else 1.0 / (cfg.temperature * cfg.rollout.batch_size)


class SVPGAgent:
    """M policy particles, their prior, particle optimizer and (optionally) critic.

    :param cfg: the resolved run config (:func:`steinrl.run.config.load_config`).
    :param observation_space: single-env observation space.
    :param action_space: single-env action space.
    :param seeds: G seeds trained as one batch of G·M particles (None: ``cfg.seed`` alone).
        Each seed's particles are initialised, sampled and fitted with its own random
        streams and coupled by the kernel only among themselves, so its run is that of the
        seed alone (to float rounding).
    :param uses_critic: build the ``critic`` section's critic (the estimator asks for one).
    :param max_grad_norm: the particle step clips each particle's gradient of J to this norm
        (the estimator's; None: no clipping).
    :param draws: the iteration's random numbers (the job's; default: a new one for ``seeds``).
    """

    def __init__(self, cfg: RLConfig, observation_space: gym.Space, action_space: gym.Space,
                 seeds: list[int] | None = None, *, uses_critic: bool = False, max_grad_norm: float | None = None,
                 draws: Draws | None = None):
        self.cfg = cfg
        self.seeds = [cfg.seed] if seeds is None else list(seeds)
        G, M = len(self.seeds), cfg.particles
        self.device = torch.device(cfg.device)
        inits = [torch.Generator().manual_seed(s) for s in self.seeds]  # each draws its policy, then its critic
        if G == 1:
            self.policy = build_policy(cfg, observation_space, action_space, inits[0])
        else:
            self.policy = build_policy(cfg, observation_space, action_space, torch.Generator(), G * M)
            _stack_particles(self.policy, [build_policy(cfg, observation_space, action_space, g) for g in inits])
        self.policy.to(self.device)
        groups = {name: g.shape[1] for name, g in self.policy.net.prior_groups().items()}
        self.prior = make_prior(cfg.prior.name, groups, G * M, settings=cfg.prior).to(self.device)
        self.finite = FiniteFlags()  #: this iteration's finiteness, checked by the job (no sync here)
        #: every random number of an iteration (rl/draws.py): the rollout's here, the update's in ``learn``
        self.draws = Draws(self.seeds, self.device) if draws is None else draws
        self.particle_optimizer: ParticleOptimizer = make_particle_optimizer(
            METHODS.get(cfg.algo.partition("-")[0]).coupling,
            self.policy.kernel_parameters() + self.prior.hyperparameters(),
            cfg.update, groups=G, temperature=cfg.temperature, prior_weight=prior_weight(cfg),
            log_prior=lambda: self.policy.log_prior(self.prior), own=self.policy.head.own_parameters(),
            max_grad_norm=max_grad_norm, finite=self.finite)
        #: B, the shared states of the particles' embedding, where the coupling asks for the
        #: particles' outputs (a function-space kernel, a spread controller); 0: none. (B <= M x
        #: rollout.batch_size: checked with the config, PolicyGradientJob.check_config.)
        self.embedding_states = self.particle_optimizer.coupling.embedding_states
        #: the last update's shared states ``(G·M, B, obs_dim)``, normalised
        #: (:func:`~steinrl.rl.embedding.shared_states`)
        self.shared_states: Tensor | None = None
        self.trim = True  #: compact each particle's valid samples to the longest (set by collect)
        #: policy.obs_stats_update: a batch's observations enter the statistics after its update (the job's
        #: :meth:`~steinrl.rl.job.PolicyGradientJob.learn` folds them), else when it is collected
        self.obs_stats_after_update = cfg.policy.obs_stats_update == "after-update"
        self.critic: Critic | None = None
        if uses_critic:
            critics = [self._build_critic(g, M) for g in inits]
            self.critic = critics[0] if G == 1 else self._build_critic(torch.Generator(), G * M)
            if G > 1:
                _stack_particles(self.critic, critics)
            self.critic.to(self.device)

    def _build_critic(self, generator: torch.Generator, num_particles: int) -> Critic:
        cfg, policy = self.cfg, self.policy
        cls = CRITICS.get(cfg.critic.name)
        options = settings_values(cfg.critic, cls.Settings)
        if issubclass(cls, LinearBaseline):
            return cls(num_particles, policy.obs_dim, **options)
        return cls(num_particles, policy.obs_dim, policy.obs_norm, cfg.policy.activation, generator, **options)

    # --- sampling -----------------------------------------------------------------
    def collect(self, sampler: Sampler, iteration: int) -> Batch:
        """Roll out all particles for one batch, seeded by ``(cfg.seed, iteration)``; every random
        number through :attr:`draws` (the policy's noise: ``"noise"``, each seed's ``rollout`` stream)."""
        cfg, policy, draws, M, E = self.cfg, self.policy, self.draws, self.cfg.particles, sampler.E
        T_max = sampler.max_steps(cfg.rollout.batch_size, cfg.rollout.sampling)
        draws.begin(iteration)
        with torch.no_grad():
            # (T, G·M, E, out_dim), each seed's block from its own stream
            noise = draws.per_seed("noise", "rollout", lambda g: policy.head.draw_noise((T_max, M, E), g, self.device),
                                   dim=1)
            seed = draws.reset_seed(iteration)
            # a device task's batch keeps every particle's (T * E) columns: no host sync to trim them
            self.trim = sampler.task.host
            act = policy.actor(noise, host=sampler.task.host)
            self.finite.clear()
            try:
                batch = sampler.collect(act, cfg.rollout.batch_size, mode=cfg.rollout.sampling, seed=seed,
                                        draws=None if sampler.task.host else draws)
            except NonFiniteError as exc:
                raise NonFiniteError(f"{exc} at iteration {iteration + 1}") from None  # counted from 1
            if sampler.action_finite is not None:  # a device task's actions, flagged by the sampler
                self.finite.add("action", sampler.action_finite)
        batch = batch.to(self.device)  # one transfer per iteration (none on CPU or device-resident)
        if not self.obs_stats_after_update:
            self.fold_obs_stats(batch)
        return batch

    def fold_obs_stats(self, batch: Batch) -> None:
        """The batch's valid observations ``(T, M, E, obs_dim)`` into the running statistics."""
        self.policy.obs_norm.observe(batch.obs[:-1].flatten(0, 2), batch.valid.flatten())

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every torch optimizer of the agent, by role: ``particles`` (the particle step's), ``own``
        (the particles' own parameters'), ``critic``."""
        critic = None if self.critic is None else self.critic.optimizer
        particles = self.particle_optimizer
        found = {"particles": particles.torch_optimizer, "own": particles.own_optimizer, "critic": critic}
        return {name: opt for name, opt in found.items() if opt is not None}

    def make_capturable(self) -> None:
        """Every optimizer safe to capture in a CUDA graph (:func:`steinrl.rl.graph.capturable`):
        step counts on the device, step sizes device tensors written in place. A critic's fit
        then runs on the iterating thread (``critic.overlap`` off: the same numbers), since a
        capture records that thread's stream only."""
        from steinrl.rl.graph import capturable

        for opt in self.optimizers().values():
            capturable(opt)
        if self.critic is not None:
            self.critic.overlap = False

    # --- state --------------------------------------------------------------------
    def state_dict(self, group: int = 0) -> dict:
        """Seed ``group``'s state, in the single-seed format whatever the number of seeds
        (what has a particle axis is declared: :mod:`steinrl.core.groups`)."""
        G = len(self.seeds)
        if self.critic is not None:
            self.critic.settle()  # (never read mid-fit)
        particle_optimizer = {"optimizer": optimizer_group(self.particle_optimizer.torch_optimizer, group, G)}
        if self.particle_optimizer.own_optimizer is not None:
            particle_optimizer["own_optimizer"] = optimizer_group(self.particle_optimizer.own_optimizer, group, G)
        if self.particle_optimizer.prev_theta is not None:
            particle_optimizer["prev_theta"] = rows(self.particle_optimizer.prev_theta, group, G)
        state = {"policy": module_group(self.policy, group, G), "prior": module_group(self.prior, group, G),
                 "particle_optimizer": particle_optimizer}
        repulsion = self.particle_optimizer.coupling.repulsion
        if repulsion is not None and repulsion.state_dict(group, G):
            state["repulsion"] = repulsion.state_dict(group, G)
        if self.critic is not None:
            extra = self.critic.extra_state()
            if "optimizer" in extra:
                extra = {**extra, "optimizer": optimizer_group(self.critic.optimizer, group, G)}
            state["critic"] = {"module": module_group(self.critic, group, G), **extra}
        return state

    def load_state_dict(self, states: list[dict] | dict) -> None:
        """Continue from one :meth:`state_dict` per seed (a single dict: one seed; earlier versions'
        checkpoints: :func:`steinrl.run.legacy.migrate_job_state`)."""
        states = [states] if isinstance(states, dict) else list(states)
        if len(states) != len(self.seeds):
            raise ValueError(f"{len(self.seeds)} seed(s) need as many states, got {len(states)}")
        if self.critic is not None:
            self.critic.settle()
        self.policy.load_state_dict(module_join(self.policy, [s["policy"] for s in states]))
        self.prior.load_state_dict(module_join(self.prior, [s["prior"] for s in states]))
        parts = [s["particle_optimizer"] for s in states]
        prev = [p.get("prev_theta") for p in parts]
        particles = self.particle_optimizer
        joined = {"optimizer": optimizer_join(particles.torch_optimizer, [p["optimizer"] for p in parts])}
        if particles.own_optimizer is not None:
            joined["own_optimizer"] = optimizer_join(particles.own_optimizer, [p["own_optimizer"] for p in parts])
        if prev[0] is not None:
            joined["prev_theta"] = torch.cat(prev)
        self.particle_optimizer.load_state_dict(joined)
        if self.particle_optimizer.coupling.repulsion is not None and "repulsion" in states[0]:
            self.particle_optimizer.coupling.repulsion.load_state_dict([s["repulsion"] for s in states])
        if self.critic is not None:
            critic = [s["critic"] for s in states]
            self.critic.load_state_dict(module_join(self.critic, [c["module"] for c in critic]))
            extra = dict(critic[0])
            if "optimizer" in extra:
                extra["optimizer"] = optimizer_join(self.critic.optimizer, [c["optimizer"] for c in critic])
            self.critic.load_extra_state(extra)

