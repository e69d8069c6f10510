"""SVPG behind the Stable-Baselines3 algorithm API (modelled on sb3-contrib's ARS).

:class:`SVPG` is a :class:`~stable_baselines3.common.base_class.BaseAlgorithm` whose
``learn`` steps the very same :class:`steinrl.Trainer` as ``train.py``, in memory, with a
config resolved by :func:`steinrl.load_config` (per-task YAML files included). The
model's ``policy`` is an :class:`~steinrl.sb3.policy.EnsembleSB3Policy` sharing the
trainer's ensemble, so ``predict``, ``evaluate_policy``, ``EvalCallback`` and
``CheckpointCallback`` see the current particles. Scalars go to SB3's logger (and to
TensorBoard through it when ``tensorboard_log`` is given).

Environments. Training always runs on steinrl's own vectorized env of
``particles * envs_per_particle`` copies of the task (next-step autoreset,
``max_episode_steps=horizon``), built from an env *id*: ``env`` may be that id (a steinrl
short name such as ``"CartpoleSwingUp"`` or any Gymnasium id), a Gymnasium env instance
or a Gymnasium ``VectorEnv`` / SB3 ``VecEnv`` (its ``spec.id`` is used; constructor
keyword arguments and wrappers are *not* carried over). ``get_env()`` returns the SB3
``VecEnv`` you passed (a gym env is wrapped in ``Monitor`` + ``DummyVecEnv`` as SB3
does; for an id or a Gymnasium vector env, a one-env ``DummyVecEnv`` of the task) -- it is
what callbacks see as ``training_env``; it does not feed training.

Timesteps. ``num_timesteps`` counts valid env steps over all particles (reset steps of
the vector env are not counted). ``learn(total_timesteps)`` stops at the end of the first
iteration at which ``num_timesteps >= total_timesteps`` (SB3's rule: a lower bound).

Callbacks. Per iteration: ``on_rollout_start`` before the rollout; after it,
``on_step`` once per vector step that had a valid env step (``num_timesteps`` advanced
by that step's valid env steps; ``self.locals`` holds ``rewards``, ``dones`` and
``infos`` -- with SB3's ``infos[i]["episode"]`` -- of that step); ``on_rollout_end``;
then the SVGD update. So ``n_calls`` counts vector steps as in SB3 (``eval_freq`` and
``save_freq`` are in vector steps of the ``particles * envs_per_particle`` envs). The
rollout is replayed to the callbacks after it is collected, so ``on_step`` returning
False stops training after this iteration's update (not before it, as in SB3).
"""

from __future__ import annotations

import io
import pathlib
import sys
import time
import warnings
from typing import Any, ClassVar, TypeVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, unwrap_vec_normalize

import steinrl
from steinrl import envs
from steinrl.errors import ConfigError
from steinrl.rl.job import RolloutHooks
from steinrl.run.checkpoint import CheckpointError, load_checkpoint
from steinrl.run.config import Config, load_config
from steinrl.run.trainer import Trainer
from steinrl.sb3.policy import EnsembleSB3Policy

__all__ = ["SVPG", "env_id_of"]

SelfSVPG = TypeVar("SelfSVPG", bound="SVPG")

FORMAT = "steinrl.sb3.SVPG"
FORMAT_VERSION = 2
# Config entries that belong to one process, not to the model.
_LOCAL_KEYS = ("run", "device")


def _short_name(env_id: str) -> str:
    """steinrl ids map back to their short names (so ``configs/<Name>.yaml`` applies)."""
    return envs.short_name(env_id)


def env_id_of(env: Any) -> str:
    """The task name SVPG trains on for ``env``: a string as is; else its ``spec.id``.

    Accepts a Gymnasium env, a Gymnasium ``VectorEnv`` or an SB3 ``VecEnv``.
    """
    if isinstance(env, str):
        return _short_name(env)
    if isinstance(env, VecEnv):
        spec = env.get_attr("spec", indices=[0])[0]
        kind = "SB3 VecEnv"
    elif isinstance(env, gym.vector.VectorEnv):
        spec = getattr(env, "spec", None)
        if spec is None and hasattr(env, "envs"):
            spec = env.envs[0].spec
        kind = "Gymnasium VectorEnv"
    elif isinstance(env, gym.Env):
        spec = env.spec
        kind = "Gymnasium env"
    else:
        raise TypeError(f"env must be an env id, a Gymnasium env, a Gymnasium VectorEnv or an SB3 VecEnv; "
                        f"got {type(env).__name__}")
    if spec is None or not getattr(spec, "id", None):
        raise ValueError(
            f"SVPG builds its own vectorized envs from an env id, but this {kind} has no spec "
            f"(it was not created by gymnasium.make); pass the env id instead, or register the env "
            f"with gymnasium.register and create it with gymnasium.make")
    return _short_name(spec.id)


def _view_env(cfg: Config) -> VecEnv:
    """A one-env SB3 VecEnv of the task (what ``get_env()`` returns when no VecEnv was given)."""
    return DummyVecEnv([lambda: Monitor(envs.make(cfg.env, max_episode_steps=cfg.rollout.horizon))])


class SVPG(BaseAlgorithm):
    """Stein variational policy gradient: M policy particles trained jointly by SVGD.

    :param policy: ``"MlpPolicy"`` / ``"EnsemblePolicy"`` or :class:`EnsembleSB3Policy`
        (the only policy class; its architecture comes from the steinrl config).
    :param env: env id (steinrl short name or Gymnasium id), Gymnasium env, Gymnasium
        ``VectorEnv`` or SB3 ``VecEnv`` (see module docstring).
    :param algo: ``<method>-<estimator>``, e.g. ``s2vgd-a2c`` (see :mod:`steinrl.run.algos`).
    :param particles: number of policy particles M.
    :param policy_kwargs: :class:`EnsembleSB3Policy` acting options for ``predict``:
        ``act_mode`` (``"sample"``, ``"particle"``, ``"mean"``), ``particle``, ``seed``
        (default: the model's seed).
    :param seed: run seed (parameter init, action noise, env resets); None draws one.
    :param device: torch device (``"auto"``: cuda if available).
    :param tensorboard_log: directory of SB3's TensorBoard logs (``<dir>/<tb_log_name>_<n>``).
    :param verbose: 0 quiet, 1 SB3's stdout table every ``log_interval`` iterations.
    :param config_files: extra steinrl YAML config files (as ``train.py --config``).
    :param config: a whole nested steinrl config (as :meth:`save` stores it), applied
        before ``config_overrides``.
    :param config_overrides: any other steinrl config key, bare where unambiguous or dotted
        through a dict, e.g. ``batch_size=1000``, ``envs_per_particle=4``,
        ``temperature=10.0``, ``horizon=500`` (``learning_rate`` is the particle step's
        ``update.lr``).
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": EnsembleSB3Policy,
        "EnsemblePolicy": EnsembleSB3Policy,
    }
    policy: EnsembleSB3Policy

    def __init__(
        self,
        policy: str | type[EnsembleSB3Policy],
        env: Any,
        algo: str = "s2vgd-a2c",
        particles: int = 16,
        policy_kwargs: dict[str, Any] | None = None,
        seed: int | None = None,
        device: torch.device | str = "cpu",
        tensorboard_log: str | None = None,
        verbose: int = 0,
        config_files: list[str] | None = None,
        config: dict[str, Any] | None = None,
        _init_setup_model: bool = True,
        **config_overrides: Any,
    ):
        if not (policy in self.policy_aliases or policy is EnsembleSB3Policy):
            raise ValueError(f"SVPG trains an EnsembleSB3Policy; got policy={policy!r} "
                             f"(use 'MlpPolicy' and set the architecture with hidden=[...])")
        name = env_id_of(env)
        if "learning_rate" in config_overrides:
            lr = config_overrides.pop("learning_rate")
            if callable(lr):
                raise ConfigError("SVPG takes a constant learning rate (update.lr); the steinrl schedule is "
                                  "update.lr_halving_every / update.lr_halving_start")
            config_overrides["update.lr"] = lr
        if "env" in config_overrides:
            raise ConfigError("'env' is set by SVPG's env argument, not a config override")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] & 0x7FFFFFFF)
        torch_device = get_device(device)
        files = list(config_files or [])
        overrides = {k: v for k, v in (config or {}).items() if k not in _LOCAL_KEYS}
        overrides.update(algo=algo, particles=particles, seed=int(seed), device=str(torch_device), **config_overrides)
        self.cfg = load_config(env=name, overrides=overrides, config_files=files)

        if isinstance(env, VecEnv):
            view = env
            if unwrap_vec_normalize(env) is not None:
                warnings.warn("SVPG trains on its own envs and does not update this VecNormalize; use "
                              "normalize_obs=True for steinrl's running observation normalisation", stacklevel=2)
        elif isinstance(env, gym.Env):
            view = env
        else:
            view = _view_env(self.cfg)

        super().__init__(
            policy=EnsembleSB3Policy,
            env=view,
            learning_rate=self.cfg.update.lr,
            policy_kwargs=policy_kwargs,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            device=torch_device,
            support_multi_env=True,
            seed=self.cfg.seed,
            supported_action_spaces=(spaces.Box, spaces.Discrete),
        )
        self.algo = self.cfg.algo
        self.particles = self.cfg.particles
        self._stop = False
        self.trainer: Trainer | None = None
        if _init_setup_model:
            self._setup_model()

    # --- model --------------------------------------------------------------------
    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        # The same Trainer train.py steps (same init for the same seed), held in memory.
        self.trainer = Trainer(self.cfg)
        single_obs = self.trainer.job.envs.single_observation_space
        single_act = self.trainer.job.envs.single_action_space
        if single_obs.shape != self.observation_space.shape or single_act != self.action_space:
            raise ValueError(f"the env's spaces ({self.observation_space}, {self.action_space}) differ from those of "
                             f"the task {self.cfg.env!r} SVPG trains on ({single_obs}, {single_act})")
        kwargs = {"seed": self.cfg.seed, **self.policy_kwargs}
        self.policy = EnsembleSB3Policy(self.observation_space, self.action_space, self.cfg,
                                        ensemble=self.agent.policy, **kwargs)

    @property
    def agent(self):
        """The :class:`steinrl.rl.agent.SVPGAgent` (particles, critic, optimizers)."""
        return self.trainer.job.agent

    @property
    def iteration(self) -> int:
        """Iterations (rollout and update) done so far."""
        return self.trainer.iteration

    # --- training -----------------------------------------------------------------
    def learn(
        self: SelfSVPG,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "SVPG",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfSVPG:
        """Train for (at least) ``total_timesteps`` valid env steps over all particles.

        :param log_interval: dump SB3's logger every this many iterations.
        :param progress_bar: SB3's progress bar over timesteps.
        """
        total_timesteps, callback = self._setup_learn(total_timesteps, callback, reset_num_timesteps,
                                                      tb_log_name, progress_bar)
        self._stop = False
        callback.on_training_start(locals(), globals())
        hooks = RolloutHooks(on_rollout_start=lambda it: callback.on_rollout_start(),
                             on_rollout_end=lambda it, batch: self._on_rollout_end(batch, callback))
        while self.num_timesteps < total_timesteps and not self._stop:
            scalars = self.trainer.step(hooks)
            if scalars is None:  # a callback stopped training before the update
                break
            self._on_iteration(scalars, total_timesteps, log_interval)
        callback.on_training_end()
        return self

    def _on_rollout_end(self, batch, callback: BaseCallback) -> bool:
        """SB3's per-step callbacks, replayed from the batch, then ``on_rollout_end``.

        As in SB3's on-policy algorithms, an ``on_step`` returning False skips the update.
        """
        self._replay_steps(batch, callback)
        callback.on_rollout_end()
        return not self._stop

    def _replay_steps(self, batch, callback: BaseCallback) -> None:
        T, M, E = batch.valid.shape
        N = M * E
        valid = batch.valid.cpu().numpy().reshape(T, N)
        rewards = batch.rewards.cpu().numpy().reshape(T, N)
        ended = batch.done.cpu().numpy().reshape(T, N) & valid
        ep_ret = np.zeros(N)
        ep_len = np.zeros(N, dtype=np.int64)
        elapsed = round(time.time() - self.start_time / 1e9, 6)
        for t in range(T):
            n_valid = int(valid[t].sum())
            if n_valid == 0:
                continue
            ep_ret += rewards[t] * valid[t]
            ep_len += valid[t]
            infos: list[dict[str, Any]] = [{} for _ in range(N)]
            for i in np.flatnonzero(ended[t]):
                infos[i]["episode"] = {"r": float(ep_ret[i]), "l": int(ep_len[i]), "t": elapsed}
                ep_ret[i] = 0.0
                ep_len[i] = 0
            self._update_info_buffer(infos, ended[t])
            self.num_timesteps += n_valid
            if self._stop:
                continue  # keep counting the steps the update uses, stop calling back
            callback.update_locals({"rewards": rewards[t] * valid[t], "dones": ended[t].copy(), "infos": infos,
                                    "iteration": self.iteration})
            if not callback.on_step():
                self._stop = True

    def _on_iteration(self, scalars: dict[str, float], total_timesteps: int, log_interval: int) -> None:
        self._n_updates += 1
        self._update_current_progress_remaining(self.num_timesteps, total_timesteps)
        for key, value in scalars.items():
            if key == "time/fps":
                key = "time/iteration_fps"
            exclude = ("stdout", "log", "json", "csv") if key.startswith("particles/") else None
            self.logger.record(key, value, exclude=exclude)
        elapsed = max((time.time_ns() - self.start_time) / 1e9, sys.float_info.epsilon)
        self.logger.record("time/fps", int((self.num_timesteps - self._num_timesteps_at_start) / elapsed))
        self.logger.record("time/iterations", self.iteration, exclude="tensorboard")
        self.logger.record("time/time_elapsed", int(elapsed), exclude="tensorboard")
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/learning_rate", self.agent.particle_optimizer.lr)
        if log_interval is not None and log_interval > 0 and self._n_updates % log_interval == 0:
            self.logger.dump(step=self.num_timesteps)

    # --- save / load --------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        policy = self.policy
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "config": {k: v for k, v in self.cfg.to_dict().items() if k not in _LOCAL_KEYS},
            "trainer": self.trainer.state_dict(),
            "num_timesteps": int(self.num_timesteps),
            "n_updates": int(self._n_updates),
            "policy": {"act_mode": policy.act_mode, "particle": policy.particle, "seed": policy.seed},
            "steinrl_version": steinrl.__version__,
        }

    def save(
        self,
        path: str | pathlib.Path | io.BufferedIOBase,
        exclude: Any = None,
        include: Any = None,
    ) -> None:
        """Write the model with ``torch.save`` (a zip archive; ``.zip`` is appended to a
        path without suffix, as SB3 does). It holds only tensors, numbers, strings, lists
        and dicts, and is read back with ``torch.load(weights_only=True)``.

        ``exclude`` / ``include`` are accepted for SB3 compatibility and ignored.
        """
        if isinstance(path, (str, pathlib.Path)):
            path = pathlib.Path(path)
            if path.suffix == "":
                path = path.with_suffix(".zip")
            path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self._state(), path)

    @classmethod
    def load(  # type: ignore[override]
        cls: type[SelfSVPG],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: Any = None,
        device: torch.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfSVPG:
        """Rebuild a model written by :meth:`save` (read without unpickling objects);
        ``env`` (default: the saved task) is the env to continue training on. ``kwargs`` go
        to the constructor (``tensorboard_log``, ``verbose``, ``policy_kwargs``, config keys)."""
        if isinstance(path, (str, pathlib.Path)):
            path = pathlib.Path(path)
            if not path.exists() and path.with_suffix(".zip").exists():
                path = path.with_suffix(".zip")
            state = load_checkpoint(path)
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
        if (not isinstance(state, dict) or state.get("format") != FORMAT
                or state.get("format_version") != FORMAT_VERSION):
            raise CheckpointError(f"{path} is not an SVPG model saved by this steinrl's steinrl.sb3.SVPG.save")
        cfg = dict(state["config"])
        top = {k: cfg.pop(k) for k in ("algo", "particles", "seed") if k in cfg}
        env_name = cfg.pop("env")
        model = cls("MlpPolicy", env if env is not None else env_name, device=device, config=cfg,
                    **{**top, "policy_kwargs": dict(state["policy"]), **kwargs})
        model.trainer.load_state_dict(state["trainer"], str(path))
        model.num_timesteps = int(state["num_timesteps"])
        model._n_updates = int(state["n_updates"])
        return model
