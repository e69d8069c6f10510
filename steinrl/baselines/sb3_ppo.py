"""SB3's PPO as a steinrl job: ``sb3-ppo`` (SB3's defaults) and ``sb3-ppo-zoo`` (rl-zoo3's entry).

One :meth:`SB3PPOJob.step` is one iteration of SB3's own ``OnPolicyAlgorithm.learn`` loop:
``collect_rollouts`` (``n_steps`` steps of each of ``n_envs`` envs), the progress update,
``train`` (``n_epochs`` passes of minibatches). So ``steinrl train``, sweeps, ``metrics.jsonl``,
TensorBoard and the plots run SB3's PPO through the same stack as steinrl's algorithms, on
the same tasks (:func:`steinrl.envs.make`, each env in SB3's ``Monitor``; VecNormalize when
``sb3.normalize``).

Scalars, named like the RL job's: ``rollout/ep_rew_mean`` and ``rollout/ep_len_mean`` over
the episodes that ended in this rollout (as steinrl's batch means; SB3's own 100-episode
window is ``rollout/ep_rew_mean_100``), ``rollout/episodes``, the headline
``rollout/ep_rew_max_particle`` (the best particle's mean: for one policy, equal to
``ep_rew_mean``, so sweeps and plots show both kinds on one key), SB3's ``train/...``
values, and ``time/fps``, ``time/iteration_seconds``, ``time/total_env_steps``, ``time/total_seconds``.

Checkpoints hold tensors and plain data only (``torch.load(weights_only=True)``): the policy
and optimizer state dicts, the VecNormalize statistics, the step and update counters and
the global RNG states. A restored run starts fresh episodes (SB3's envs are not saved).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Protocol

import numpy as np
import torch

from steinrl import envs
from steinrl.baselines.hyperparams import ACTIVATIONS, SB3Settings, sb3_options, sb3_settings
from steinrl.errors import ConfigError
from steinrl.job import Chosen, RunConfig, headline_summary
from steinrl.registry import Option

__all__ = ["NormalizedPolicy", "SB3Config", "SB3PPOJob", "make_vec_env"]

VARIANTS = ("ppo", "ppo-zoo")
_RESUME_WARNED = False


def make_vec_env(env: str, n_envs: int, seed: int, horizon: int | None = None) -> Any:
    """SB3's ``make_vec_env`` of steinrl's task ``env`` (a DummyVecEnv, each env in a ``Monitor``;
    env ``i`` first reset with ``seed + i``)."""
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env

    kwargs = {} if horizon is None else {"max_episode_steps": horizon}
    return sb3_make_vec_env(lambda: envs.make(env, **kwargs), n_envs=n_envs, seed=seed)


def _normalize_state(venv: Any) -> dict[str, Any]:
    """VecNormalize's running statistics as tensors (``{}`` without VecNormalize)."""
    from stable_baselines3.common.vec_env import VecNormalize

    if not isinstance(venv, VecNormalize):
        return {}
    return {f"{name}_{key}": torch.as_tensor(np.asarray(getattr(rms, key), dtype=np.float64))
            for name, rms in (("obs", venv.obs_rms), ("ret", venv.ret_rms)) for key in ("mean", "var", "count")}


def _load_normalize_state(venv: Any, state: dict[str, Any]) -> None:
    for name, rms in (("obs", venv.obs_rms), ("ret", venv.ret_rms)):
        rms.mean = state[f"{name}_mean"].numpy().copy()
        rms.var = state[f"{name}_var"].numpy().copy()
        rms.count = float(state[f"{name}_count"])


def _rng_state() -> dict[str, Any]:
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"torch": torch.get_rng_state(), "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
            "numpy_rest": [int(pos), int(has_gauss), float(gauss)]}


def _load_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    pos, has_gauss, gauss = state["numpy_rest"]
    np.random.set_state(("MT19937", state["numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, gauss))


class SB3Config(RunConfig, Protocol):
    """A resolved config of ``sb3-ppo`` / ``sb3-ppo-zoo``, as the SB3 job reads it."""

    max_seconds: float | None
    sb3: SB3Settings


def build_model(cfg: SB3Config, venv: Any, seed: int | None) -> Any:
    """SB3's PPO with the ``sb3`` section's hyperparameters on ``venv``; ``seed`` (if not None)
    seeds SB3's global RNGs and the envs, as ``PPO(seed=...)`` does."""
    from stable_baselines3 import PPO

    h = cfg.sb3
    policy_kwargs = {"net_arch": {"pi": list(h.net_arch), "vf": list(h.net_arch)},
                     "activation_fn": getattr(torch.nn, ACTIVATIONS[h.activation]),
                     "ortho_init": h.ortho_init, "log_std_init": h.log_std_init}
    with warnings.catch_warnings():
        # SB3 warns when batch_size does not divide n_steps * n_envs (the zoo's MountainCarContinuous)
        warnings.filterwarnings("ignore", message=".*mini-batch.*")
        return PPO("MlpPolicy", venv, learning_rate=h.learning_rate, n_steps=h.n_steps, batch_size=h.batch_size,
                   n_epochs=h.n_epochs, gamma=h.gamma, gae_lambda=h.gae_lambda, clip_range=h.clip_range,
                   ent_coef=h.ent_coef, vf_coef=h.vf_coef, max_grad_norm=h.max_grad_norm, use_sde=h.use_sde,
                   sde_sample_freq=h.sde_sample_freq, policy_kwargs=policy_kwargs, seed=seed, device=cfg.device,
                   verbose=0)


class NormalizedPolicy:
    """An SB3 policy acting on raw observations: VecNormalize's saved observation statistics
    are applied first (as an evaluation env wrapped in ``VecNormalize(training=False)`` would).

    :param policy: SB3's ``ActorCriticPolicy``.
    :param normalizer: a VecNormalize holding the run's statistics, or None.
    """

    def __init__(self, policy: Any, normalizer: Any = None) -> None:
        self.policy, self.normalizer = policy, normalizer

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: np.ndarray | None = None,
                deterministic: bool = False) -> tuple[np.ndarray, Any]:
        """SB3's ``predict`` on observations ``(n_envs, obs_dim)``."""
        if self.normalizer is not None:
            observation = self.normalizer.normalize_obs(observation)
        return self.policy.predict(observation, state, episode_start, deterministic)


class SB3PPOJob:
    """SB3's PPO on one task, one rollout + update per :meth:`step`.

    :param cfg: the resolved config of ``sb3-ppo`` or ``sb3-ppo-zoo``.
    :param seeds: unused beyond ``[cfg.seed]`` (one seed per job).
    """

    #: the RL job's headline (the best particle's mean return over the batch's episodes): for
    #: one policy, its mean return, so sweeps and plots put both kinds on one key
    headline_metric = "rollout/ep_rew_max_particle"
    headline_mode = "max"
    x_metric = None  #: curves are drawn against the iteration, as the RL job's
    #: its scalars in words, for figure axes (its headline is the RL job's key, named there)
    metric_labels = {"rollout/ep_rew_mean_100": "mean return, last 100 episodes", "time/total_env_steps": "env steps"}
    #: raises a one-line ConfigError naming the valid tasks if ``name`` is not one
    check_env = staticmethod(envs.resolve_env_id)
    options: tuple[Option, ...] = (
        Option("particles", int, 1, "Unused: SB3's PPO trains one policy (kept so that shared task files apply).",
               check=lambda v: None if v >= 1 else "must be >= 1"),
        Option("max_seconds", (float, None), None, "Stop after the rollout and update that take the run's training "
               "time (summed over resumes) past this many seconds, before sb3.timesteps; null: no limit (a "
               "side-by-side budget in wall-clock time, as steinrl's own max_seconds).",
               check=lambda v: None if v > 0 else "must be > 0"),
    )

    @staticmethod
    def check_config(cfg: SB3Config) -> None:
        """No keys of SB3's PPO bound each other here (SB3 checks its own arguments)."""

    # --- the algorithms and their config ----------------------------------------------
    @staticmethod
    def algorithm_names() -> list[str]:
        return [f"sb3-{v}" for v in VARIANTS]

    @staticmethod
    def parse(name: str) -> tuple[None, str] | None:
        """``(None, variant)`` of ``sb3-ppo`` / ``sb3-ppo-zoo``, or None."""
        prefix, _, variant = name.partition("-")
        return (None, variant) if prefix == "sb3" and variant in VARIANTS else None

    @classmethod
    def sections(cls, method: None, variant: str, chosen: Chosen) -> dict[str, type]:
        """The ``sb3`` section, its defaults SB3's (``ppo``) or the task's zoo entry (``ppo-zoo``)."""
        return {"sb3": sb3_settings(variant, chosen.env or "")}

    @classmethod
    def doc_sections(cls) -> list[tuple[str, str, tuple[Option, ...]]]:
        sb3 = "sb3-ppo: SB3's defaults (sb3-ppo-zoo: the task's rl-zoo3 entry, configs/sb3/ppo_zoo.yaml)"
        return [("", "sb3-ppo, sb3-ppo-zoo", cls.options), ("sb3", sb3, sb3_options("ppo", ""))]

    @classmethod
    def summary(cls, rows: list[dict[str, float]]) -> str:
        return headline_summary(rows, cls.headline_metric, cls.headline_mode)

    @staticmethod
    def progress_fields(scalars: dict[str, float]) -> dict[str, str]:
        """``ret``: SB3's own ``ep_rew_mean``, the mean over the last 100 episodes (an iteration in
        which no episode ended keeps the last value instead of showing nan)."""
        return {"ret": f"{scalars['rollout/ep_rew_mean_100']:.1f}", "steps": f"{scalars['time/total_env_steps']:.0f}",
                "sps": f"{scalars['time/fps']:.0f}"}

    @classmethod
    def load_policy(cls, cfg: SB3Config, job_state: dict[str, Any], device: str) -> NormalizedPolicy:
        """The trained policy of ``job_state`` acting on raw observations (:class:`NormalizedPolicy`)."""
        from stable_baselines3.common.vec_env import VecNormalize

        venv = make_vec_env(cfg.env, 1, cfg.seed, cfg.sb3.horizon)
        outside = _rng_state()
        model = build_model(cfg.replace({"device": device}), venv, seed=None)
        _load_rng_state(outside)  # building the networks drew from the global RNG: undo it
        model.policy.load_state_dict(job_state["policy"])
        model.policy.set_training_mode(False)
        normalizer = None
        if job_state.get("normalize"):
            normalizer = VecNormalize(venv, training=False, norm_reward=False, gamma=cfg.sb3.gamma)
            _load_normalize_state(normalizer, job_state["normalize"])
        return NormalizedPolicy(model.policy, normalizer)

    # --- running ------------------------------------------------------------------------
    def __init__(self, cfg: SB3Config, seeds: list[int] | None = None) -> None:
        seeds = [cfg.seed] if seeds is None else [int(s) for s in seeds]
        if not seeds or len(set(seeds)) != len(seeds):
            raise ConfigError(f"seeds must be distinct, got {seeds}")
        self.cfg, self.seeds = cfg, seeds
        self.runs = [_SeedRun(cfg if s == cfg.seed else cfg.replace({"seed": s}), self.num_steps) for s in seeds]

    @staticmethod
    def batch_config(cfg: SB3Config, seeds: list[int]) -> SB3Config:
        """Seeds trained together need nothing pinned: each has its own model (``cfg`` as is)."""
        return cfg

    @staticmethod
    def batch_note(cfg: SB3Config, seeds: list[int]) -> None:
        """Nothing to say: each seed trains as SB3's ``learn`` alone would."""
        return None

    @property
    def num_steps(self) -> int:
        """Iterations: ``timesteps`` in whole rollouts of ``n_steps * n_envs`` env steps."""
        return math.ceil(self.cfg.sb3.timesteps / (self.cfg.sb3.n_steps * self.cfg.sb3.n_envs))

    def done(self, iteration: int) -> bool:
        """``sb3.timesteps`` reached (in whole rollouts) after ``iteration`` iterations, or every
        seed's training time past ``max_seconds``."""
        seconds = self.cfg.max_seconds
        return iteration >= self.num_steps or (seconds is not None and min(r.seconds for r in self.runs) >= seconds)

    def step(self, iteration: int, hooks: Any = None) -> list[dict[str, float]]:
        """One rollout and one PPO update of every seed (one after the other); each seed's scalars."""
        return [run.step() for run in self.runs]

    def state_dict(self, seed_index: int = 0) -> dict[str, Any]:
        return self.runs[seed_index].state_dict()

    def load_state_dict(self, states: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Continue from one state per seed; the envs start fresh episodes (warned once per process)."""
        global _RESUME_WARNED
        states = [states] if isinstance(states, dict) else list(states)
        if len(states) != len(self.runs):
            raise ValueError(f"{len(self.runs)} seed(s) need as many states, got {len(states)}")
        for run, state in zip(self.runs, states):
            run.load_state_dict(state)
        if not _RESUME_WARNED:
            _RESUME_WARNED = True
            warnings.warn(f"{self.cfg.algo}: a resumed run starts fresh episodes (SB3's envs are not saved), so it "
                          "does not continue exactly as the uninterrupted run would", stacklevel=2)

    def close(self) -> None:
        for run in self.runs:
            run.model.env.close()


class _SeedRun:
    """One seed's SB3 PPO, stepped as ``OnPolicyAlgorithm.learn`` steps it. Its own copy of the
    global torch / numpy RNG states is swapped in around each step, so seeds trained together
    (or other code between steps) do not change its run."""

    def __init__(self, cfg: SB3Config, iterations: int) -> None:
        from stable_baselines3.common.logger import Logger
        from stable_baselines3.common.vec_env import VecNormalize

        self.cfg, h = cfg, cfg.sb3
        outside = _rng_state()
        venv = make_vec_env(cfg.env, h.n_envs, cfg.seed, h.horizon)
        if h.normalize:
            venv = VecNormalize(venv, gamma=h.gamma)
        self.model = build_model(cfg, venv, cfg.seed)
        self.rollout_size = h.n_steps * h.n_envs
        self.total = iterations * self.rollout_size
        self.episodes = _episode_recorder()
        self.model.set_logger(Logger(folder=None, output_formats=[]))  # values are read, never written
        self.callback = self.model._setup_learn(self.total, self.episodes, reset_num_timesteps=True)[1]
        self.callback.on_training_start(locals(), globals())
        self.rng = _rng_state()
        _load_rng_state(outside)
        self.seconds = 0.0  #: training seconds so far (rollouts and updates; summed over resumes)

    def step(self) -> dict[str, float]:
        """One rollout and one PPO update; returns the scalars."""
        model, outside = self.model, _rng_state()
        _load_rng_state(self.rng)
        self.episodes.returns, self.episodes.lengths = [], []
        t0 = time.perf_counter()
        model.collect_rollouts(model.env, self.callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
        model._update_current_progress_remaining(model.num_timesteps, self.total)
        t1 = time.perf_counter()
        model.train()
        t2 = time.perf_counter()
        self.seconds += t2 - t0
        self.rng = _rng_state()
        _load_rng_state(outside)
        train = {k: float(v) for k, v in model.logger.name_to_value.items() if k.startswith("train/")}
        model.logger.dump(model.num_timesteps)  # clears the recorded values (no output formats)
        returns, lengths = self.episodes.returns, self.episodes.lengths
        window = [e["r"] for e in model.ep_info_buffer]
        mean = float(np.mean(returns)) if returns else float("nan")
        return {
            "rollout/ep_rew_mean": mean, "rollout/ep_len_mean": float(np.mean(lengths)) if lengths else float("nan"),
            "rollout/ep_rew_max_particle": mean, "rollout/episodes": float(len(returns)),
            "rollout/ep_rew_mean_100": float(np.mean(window)) if window else float("nan"),
            **train,
            "time/fps": self.rollout_size / (t2 - t0), "time/rollout_fps": self.rollout_size / (t1 - t0),
            "time/iteration_seconds": t2 - t0, "time/total_env_steps": float(model.num_timesteps),
            "time/total_seconds": self.seconds,
        }

    def state_dict(self) -> dict[str, Any]:
        model = self.model
        return {"policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict(),
                "num_timesteps": int(model.num_timesteps), "n_updates": int(model._n_updates),
                "normalize": _normalize_state(model.env), "rng": self.rng, "seconds": self.seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        model = self.model
        model.policy.load_state_dict(state["policy"])
        model.policy.optimizer.load_state_dict(state["optimizer"])
        model.num_timesteps, model._n_updates = int(state["num_timesteps"]), int(state["n_updates"])
        self.rng = state["rng"]
        self.seconds = float(state.get("seconds", 0.0))  # (checkpoints before it was kept: from 0)
        model.env.seed(self.cfg.seed + model.num_timesteps)  # fresh episodes, seeded
        model._last_obs = model.env.reset()
        model._last_episode_starts = np.ones((model.env.num_envs,), dtype=bool)
        if state["normalize"]:  # the saved statistics (not updated by the reset), applied to its observations
            _load_normalize_state(model.env, state["normalize"])
            model._last_obs = model.env.normalize_obs(model.env.get_original_obs())


def _episode_recorder() -> Any:
    """A callback that collects the return and length of every episode ending during a rollout
    (``Monitor``'s ``episode`` info); SB3 is imported on use."""
    from stable_baselines3.common.callbacks import BaseCallback

    class EpisodeRecorder(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: list[float] = []
            self.lengths: list[float] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(float(info["episode"]["r"]))
                    self.lengths.append(float(info["episode"]["l"]))
            return True

    return EpisodeRecorder()
