"""The RL job a :class:`steinrl.Trainer` steps: envs + sampler + :class:`SVPGAgent`.

:class:`PolicyGradientJob` declares the config sections an RL algorithm needs
(:meth:`PolicyGradientJob.sections`) and runs one iteration per :meth:`step`:
collect a batch with every particle, update, and return the iteration's scalars
(SB3's ``rollout/...`` keys, the papers' ``rollout/ep_rew_max_particle``, ``train/...``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from steinrl import envs
from steinrl.core.couplings import COUPLINGS, check_embedding_states
from steinrl.core.finite import FiniteFlags
from steinrl.core.layers import LAYERS
from steinrl.core.methods import METHODS
from steinrl.core.particle_optimizer import OPTIMIZER_OPTIONS, OptimizerSettings, halved_lr, set_lr
from steinrl.core.priors import PRIORS
from steinrl.job import Chosen, headline_summary
from steinrl.registry import Option, compose, options_of, settings_options
from steinrl.rl.agent import SVPGAgent
from steinrl.rl.backend import check_seeds, env_backend, make_envs
from steinrl.rl.critics import CRITICS, ValueEnsembleSettings
from steinrl.rl.diagnostics import METRIC_LABELS, UpdateStats, episode_scalars, pack, to_host, unpack
from steinrl.rl.draws import Draws
from steinrl.rl.estimators import ESTIMATORS
from steinrl.rl.graph import IterationGraph, graph_mode
from steinrl.rl.heads import HEADS
from steinrl.rl.policy import POLICY_OPTIONS, EnsemblePolicy, PolicySettings
from steinrl.rl.rollout import ROLLOUT_OPTIONS, Batch, RolloutSettings, Sampler
from steinrl.rl.settings import RL_LAYER_DEFAULTS, RL_OPTIONS, CriticChoice, PriorChoice, PriorWeight, RLConfig
from steinrl.rl.tasks import DeviceTask, HostTask

__all__ = ["PolicyGradientJob", "RolloutHooks", "check_seeds", "env_backend", "episode_scalars", "make_envs", "to_host"]


@dataclass
class RolloutHooks:
    """Calls around an iteration's rollout (used by :class:`steinrl.sb3.SVPG`).

    ``on_rollout_end`` returning False skips the update: the iteration is not done.
    """

    on_rollout_start: Callable[[int], None] | None = None
    on_rollout_end: Callable[[int, Batch], bool] | None = None


class PolicyGradientJob:
    """M policy particles on ``M * E`` envs, trained by SVPG one iteration per :meth:`step`.

    :param cfg: the resolved config of an RL algorithm (``<method>-<estimator>``).
    """

    #: The scalar summarising a run (the papers' metric): its final and best values end a CLI run.
    headline_metric = "rollout/ep_rew_max_particle"
    headline_mode = "max"  #: larger returns are better
    x_metric = None  #: curves are drawn against the iteration
    metric_labels = METRIC_LABELS  #: its scalars in words, for figure axes
    #: Top-level options of RL runs (besides the Trainer's own).
    options: tuple[Option, ...] = RL_OPTIONS

    @staticmethod
    def algorithm_names() -> list[str]:
        return [f"{m}-{e}" for e in ESTIMATORS for m in METHODS]

    @staticmethod
    def parse(name: str) -> tuple[str, str] | None:
        """``(method, estimator)`` of ``<method>-<estimator>``, or None if it is not an RL algorithm."""
        method, _, estimator = name.partition("-")
        return (method, estimator) if method in METHODS and estimator in ESTIMATORS else None

    @classmethod
    def summary(cls, rows: list[dict[str, float]]) -> str:
        return headline_summary(rows, cls.headline_metric, cls.headline_mode)

    @classmethod
    def sections(cls, method: str, estimator: str, chosen: Chosen) -> dict[str, type]:
        """The typed config sections of ``<method>-<estimator>``: section -> settings class, each
        composed of the settings of the parts the algorithm picks (:mod:`steinrl.rl.settings`).

        :param chosen: the part names picked inside the config (``prior``, ``critic``).
        """
        m, est = METHODS.get(method), ESTIMATORS.get(estimator)
        layer = LAYERS.get(m.layer).Settings
        layer_defaults = {**m.layer_defaults, **RL_LAYER_DEFAULTS.get(method, {})}
        prior = PRIORS.get(chosen.prior or PriorChoice().name).Settings
        sections: dict[str, type] = {
            "rollout": RolloutSettings,
            "policy": compose("PolicySection", PolicySettings, *(head.Settings for _, head in HEADS.items())),
            "layer": compose(layer.__name__, layer, defaults=layer_defaults) if layer_defaults else layer,
            "prior": compose("PriorSection", PriorChoice, prior, PriorWeight),
            "update": compose("UpdateSection", OptimizerSettings, COUPLINGS.get(m.coupling).Settings),
            "estimator": est.Settings,
        }
        if est.uses_critic:
            critic = CRITICS.get(chosen.critic or CriticChoice().name).Settings
            sections["critic"] = compose("CriticSection", CriticChoice, critic)
        return sections

    @classmethod
    def doc_sections(cls) -> list[tuple[str, str, tuple[Option, ...]]]:
        """``(section, part, options)`` of every registered part, for docs/config.md."""
        rows = [("", "RL", cls.options), ("rollout", "", ROLLOUT_OPTIONS), ("policy", "", POLICY_OPTIONS)]
        rows += [("policy", f"{name} head", options_of(head)) for name, head in HEADS.items()]
        used = {m.layer: [n for n, mm in METHODS.items() if mm.layer == m.layer] for _, m in METHODS.items()}
        rows += [("layer", f"{name} (methods {', '.join(used.get(name, []))})", options_of(layer))
                 for name, layer in LAYERS.items()]
        rows += [("prior", "every prior", settings_options(PriorChoice) + settings_options(PriorWeight))]
        rows += [("prior", name, options_of(prior)) for name, prior in PRIORS.items()]
        rows += [("update", "every method (the particle optimizer)", OPTIMIZER_OPTIONS)]
        rows += [("update", name, options_of(coupling)) for name, coupling in COUPLINGS.items()
                 if options_of(coupling)]
        rows += [("estimator", name, options_of(est)) for name, est in ESTIMATORS.items()]
        rows += [("critic", "every critic", settings_options(CriticChoice))]
        rows += [("critic", name, options_of(critic)) for name, critic in CRITICS.items()]
        return rows

    @staticmethod
    def progress_fields(scalars: dict[str, float]) -> dict[str, str]:
        """The progress bar's fields: mean return, best particle's mean return, env steps per second."""
        return {"ret": f"{scalars['rollout/ep_rew_mean']:.1f}", "best": f"{scalars['rollout/ep_rew_max_particle']:.1f}",
                "sps": f"{scalars['time/fps']:.0f}"}

    #: raises a one-line ConfigError naming the valid tasks if ``name`` is not one
    check_env = staticmethod(envs.resolve_env_id)

    @staticmethod
    def check_config(cfg: RLConfig) -> None:
        """The embedding (a function-space kernel's, a spread controller's) draws its B shared states
        from one iteration's batch of a seed: B <= particles x ``rollout.batch_size``."""
        held = cfg.particles * cfg.rollout.batch_size
        check_embedding_states(cfg.update, held, f"a seed's batch holds (particles x rollout.batch_size = {held})")

    @classmethod
    def load_policy(cls, cfg: RLConfig, job_state: dict[str, Any], device: str) -> EnsemblePolicy:
        """The policy ensemble (M particles, in eval mode, on ``device``) held by ``job_state``,
        a checkpoint's ``job`` entry (:meth:`state_dict`). A state that does not hold this
        config's policy raises KeyError, TypeError or RuntimeError (the caller names the file)."""
        from steinrl.rl.agent import build_policy

        single = envs.make(cfg.env)
        try:
            policy = build_policy(cfg, single.observation_space, single.action_space).to(device)
        finally:
            single.close()
        policy.load_state_dict(job_state["agent"]["policy"])
        return policy.eval()

    @staticmethod
    def batch_config(cfg: RLConfig, seeds: list[int]) -> RLConfig:
        """The config of a batch of several seeds: the torch backend it needs, pinned (so a
        seed's run directory resumes alone on the same envs)."""
        check_seeds(cfg, seeds)
        env_backend(cfg, len(seeds))  # a ConfigError if the backend cannot batch seeds
        return cfg.replace({"rollout.env_backend": "torch"})

    @staticmethod
    def batch_note(cfg: RLConfig, seeds: list[int]) -> str:
        """Whose runs a batch's seeds are, to float rounding (``tests/test_seeds.py``)."""
        alone = env_backend(cfg, 1)
        who = "`--seed S` alone" if alone == "torch" else ("`--seed S --set rollout.env_backend=torch` alone, not of "
                                                          f"`--seed S` (on {cfg.device} it steps the {alone} envs)")
        return (f"note: the batch steps the envs' torch twins (rollout.env_backend=torch, in each seed's config.yaml): "
                f"seed S is the run of {who}, to float rounding only, which training amplifies over the iterations")

    def __init__(self, cfg: RLConfig, seeds: list[int] | None = None) -> None:
        self.cfg = cfg
        self.seeds = check_seeds(cfg, seeds)
        S, M, E, horizon = len(self.seeds), cfg.particles, cfg.rollout.envs_per_particle, cfg.rollout.horizon
        backend = env_backend(cfg, S)
        est = ESTIMATORS.get(cfg.algo.split("-", 1)[1])
        graphed = graph_mode(cfg, backend, est.host_reads(cfg.estimator))  # a ConfigError before anything is built
        if backend == "torch":
            from steinrl.envs.torch_tasks import make_torch_vec
            from steinrl.envs.warp_mujoco import make_warp_vec, warp_backend

            make = make_warp_vec if warp_backend(cfg.env, cfg.device, cfg.rollout) else make_torch_vec
            self.envs = make(cfg.env, S * M * E, device=cfg.device, max_episode_steps=horizon, groups=S)
            task: HostTask | DeviceTask = DeviceTask(self.envs)
            single = envs.make(cfg.env)
            spaces = single.observation_space, single.action_space
            single.close()
        else:
            self.envs = make_envs(cfg)  #: the vector env (host) or the torch task (device)
            task = HostTask(self.envs)
            spaces = self.envs.single_observation_space, self.envs.single_action_space
        self.task = task
        self.sampler = Sampler(task, S * M, E, horizon, compile=cfg.rollout.compile)
        #: the estimator: its advantages and its update, :meth:`~steinrl.rl.estimators.Estimator.learn`
        self.estimator = est(cfg.estimator, groups=S, device=cfg.device)
        self.draws = Draws(self.seeds, cfg.device)  #: every random number of an iteration (rl/draws.py)
        self.agent = SVPGAgent(cfg, *spaces, seeds=self.seeds, uses_critic=est.uses_critic,
                               max_grad_norm=self.estimator.max_grad_norm, draws=self.draws)
        #: the iteration as a CUDA graph (``run.cuda_graph``), or None: eager
        self.graph = IterationGraph(self._iterate, self.draws, torch.device(cfg.device)) if graphed else None
        if self.graph is not None:
            self.agent.make_capturable()
        self._layout: list[tuple[str, tuple[int, ...]]] = []  # where each value lies in the packed iteration
        self.env_steps = [0] * S  #: env steps taken so far, each seed (all its particles)
        self.seconds = 0.0  #: training seconds so far (summed over resumes)

    def steps_per_iteration(self) -> int | None:
        """Env steps of one iteration, all particles of one seed (None: it varies, whole episodes)."""
        cfg = self.cfg
        if cfg.rollout.sampling == "whole_episodes":
            return None
        E = cfg.rollout.envs_per_particle
        return cfg.particles * E * -(-cfg.rollout.batch_size // E)

    @property
    def num_steps(self) -> int:
        """Iterations of a whole run (with ``total_steps``: as many as reach it, estimated for
        whole episodes from ``batch_size`` per particle)."""
        total = self.cfg.total_steps
        if total is None:
            return self.cfg.iterations
        per = self.steps_per_iteration() or self.cfg.particles * self.cfg.rollout.batch_size
        return max(1, -(-total // per))

    def done(self, iteration: int) -> bool:
        """The run's stopping rule after ``iteration`` iterations: the iterations, or the env
        steps of every seed (``total_steps``); and the training seconds (``max_seconds``)."""
        cfg = self.cfg
        if cfg.max_seconds is not None and self.seconds >= cfg.max_seconds:
            return True
        if cfg.total_steps is not None:
            return min(self.env_steps) >= cfg.total_steps
        return iteration >= cfg.iterations

    def progress(self, iteration: int) -> float:
        """The fraction of the run done after ``iteration`` iterations, in [0, 1] (for schedules)."""
        if self.cfg.total_steps is not None:
            return min(1.0, min(self.env_steps) / self.cfg.total_steps)
        return min(1.0, iteration / self.cfg.iterations)

    def set_step_sizes(self, iteration: int) -> None:
        """What an iteration reads from the host, set before it runs (a replayed graph reads these
        values): every step size, ``update.lr`` on the halving schedule (``update.lr_halving_every``)
        and ``critic.lr``, each times the estimator's
        :meth:`~steinrl.rl.estimators.Estimator.lr_fraction` (annealing over :meth:`progress`), and
        the repulsion controller's choice of the iteration (the bandit's λ)."""
        update, particles, critic = self.cfg.update, self.agent.particle_optimizer, self.agent.critic
        fraction = self.estimator.lr_fraction(self.progress(iteration))
        if particles.coupling.repulsion is not None:
            particles.coupling.repulsion.start(iteration, self.seeds)
        particles.set_lr(halved_lr(update.lr, iteration, update.lr_halving_every, update.lr_halving_start) * fraction)
        if critic is not None and critic.optimizer is not None and isinstance(self.cfg.critic, ValueEnsembleSettings):
            set_lr(critic.optimizer, self.cfg.critic.lr * fraction)

    def learn(self, batch: Batch) -> UpdateStats:
        """The estimator's update on ``batch`` (the step sizes set before, :meth:`set_step_sizes`),
        then (``policy.obs_stats_update: after-update``) the batch's observations into the
        statistics the next rollout acts on."""
        stats = self.estimator.learn(self.agent, batch, self.draws)
        if self.agent.obs_stats_after_update:
            self.agent.fold_obs_stats(batch)
        return stats

    def step(self, iteration: int, hooks: RolloutHooks | None = None) -> list[dict[str, float]] | None:
        """Collect and learn once; returns each seed's scalars (None if ``on_rollout_end`` skipped the update)."""
        if hooks is not None and hooks.on_rollout_start is not None:
            hooks.on_rollout_start(iteration)
        t0 = time.perf_counter()
        if self.graph is not None and hooks is None:  # the whole iteration, replayed
            self.set_step_sizes(iteration)
            host = unpack(self.graph(iteration).cpu().numpy(), self._layout)  # the one transfer
            t1 = t2 = time.perf_counter()
        else:
            batch = self.agent.collect(self.sampler, iteration)
            t1 = time.perf_counter()
            if hooks is not None and hooks.on_rollout_end is not None and \
                    hooks.on_rollout_end(iteration, batch) is False:
                return None
            self.set_step_sizes(iteration)
            host = to_host(self._values(batch, self.learn(batch)))  # the one transfer
            t2 = time.perf_counter()
        S, M = len(self.seeds), self.cfg.particles
        FiniteFlags.raise_if_any({k[len("finite/"):]: v for k, v in host.items() if k.startswith("finite/")},
                                 iteration + 1)  # messages count iterations from 1
        if host.get("envs/overflowed", 0):  # MuJoCo Warp dropped contacts: its named error
            self.envs.check_overflow()
        steps = host["steps"]
        self.env_steps = [int(a + b) for a, b in zip(self.env_steps, steps)]
        self.seconds += t2 - t0
        rows = []
        for s in range(S):
            scalars = episode_scalars(host["episodes"][:, s * M:(s + 1) * M])
            scalars.update({k: float(host[k][s]) for k in host if k.startswith("train/")})
            scalars.update({
                "time/fps": steps[s] / (t2 - t0),
                "time/rollout_fps": steps[s] / (t1 - t0),
                "time/iteration_seconds": t2 - t0,
                "time/steps_per_particle": steps[s] / M,
                "time/total_env_steps": float(self.env_steps[s]),
                "time/total_seconds": self.seconds,
            })
            rows.append(scalars)
        repulsion = self.agent.particle_optimizer.coupling.repulsion
        if repulsion is not None:  # the iteration's score per seed (the bandit's reward)
            repulsion.observe([row.get("rollout/ep_rew_max_particle", math.nan) for row in rows])
        return rows

    def _values(self, batch: Batch, stats: UpdateStats) -> dict[str, Tensor]:
        """What the host reads of an iteration: valid steps and episode statistics per seed, the
        update's scalars per seed, the finiteness flags."""
        S = len(self.seeds)
        train = {**stats.group_means(S), **self.agent.policy.head.diagnostics(S)}  # (S,) each
        return {"steps": batch.valid.view(batch.valid.shape[0], S, -1).sum((0, 2)),  # valid steps per seed
                "episodes": batch.episode_stats, **{f"train/{k}": v for k, v in train.items()},
                **{f"finite/{k}": v for k, v in self.agent.finite.flags.items()},
                **({"envs/overflowed": self.envs.overflowed().any()} if hasattr(self.envs, "overflowed") else {})}

    def _iterate(self, iteration: int) -> Tensor:
        """One graph-safe iteration (the step sizes set before): collect, learn, and what the host
        reads, packed in one tensor (:func:`pack`; its layout kept for :func:`unpack`)."""
        batch = self.agent.collect(self.sampler, iteration)
        flat, self._layout = pack(self._values(batch, self.learn(batch)))
        return flat

    def state_dict(self, seed_index: int = 0) -> dict:
        """Seed ``seed_index``'s state, in the single-seed format (it resumes alone)."""
        G = len(self.seeds)
        return {"agent": {**self.agent.state_dict(seed_index), **self.estimator.state_dict(seed_index, G)},
                "sampler": self.sampler.state_dict(seed_index, G),
                "progress": {"env_steps": self.env_steps[seed_index], "seconds": self.seconds}}

    def load_state_dict(self, states: list[dict] | dict) -> None:
        """Continue from one :meth:`state_dict` per seed (a single dict: one seed)."""
        states = [states] if isinstance(states, dict) else list(states)
        self.agent.load_state_dict([s["agent"] for s in states])
        self.estimator.load_state_dict([s["agent"] for s in states])
        self.sampler.load_state_dict([s["sampler"] for s in states])
        progress = [s.get("progress", {}) for s in states]  # (checkpoints before total_steps existed: none)
        self.env_steps = [int(p.get("env_steps", 0)) for p in progress]
        self.seconds = float(progress[0].get("seconds", 0.0))
        if self.graph is not None:  # the loaded state lives in new tensors: warm up and capture again
            self.draws.thaw()
            self.graph = IterationGraph(self._iterate, self.draws, self.graph.device, self.graph.capture)
            if self.graph.capture:
                self.agent.make_capturable()

    def close(self) -> None:
        if hasattr(self.task, "close"):
            self.task.close()
