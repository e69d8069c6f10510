"""EnvPool's C++ batched MuJoCo tasks as a Gymnasium ``VectorEnv`` (optional extra).

``pip install "steinrl[envpool]"`` installs `EnvPool <https://envpool.readthedocs.io>`_,
whose v5 MuJoCo tasks step a batch of envs in C++ threads (faster than Gymnasium's
``SyncVectorEnv``; measured in research/results/mujoco_throughput.md). :class:`EnvPoolVectorEnv` presents
such a pool exactly as Gymnasium's own vector env of the same id does (tests/test_envpool.py):

- the same spaces (Gymnasium's ``float32`` action Box; EnvPool declares ``float64``);
- next-step autoreset (``metadata["autoreset_mode"]``): the step after an episode ends
  ignores its action and returns a fresh episode's first observation, reward 0, neither
  terminated nor truncated;
- time-limit truncation at ``max_episode_steps`` (default: the id's registered limit), with
  Gymnasium's ``TimeLimit`` semantics: an episode that terminates on its last step is both
  terminated and truncated (EnvPool's own limit would report it truncated only);
- ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list seeds each env) and replays the
  same initial states every time, as Gymnasium does. EnvPool fixes its seeds when a pool is
  built, so a seeded reset builds a new pool (costly: keep seeded resets rare); an unseeded
  reset continues the current pool's random streams.

Rewards come back as float64 (EnvPool computes them in float64 and returns float32, so they
match Gymnasium's to about 1e-7). The ``info`` dict holds EnvPool's own keys (e.g. Hopper:
``x_position``, ``x_velocity``, ``elapsed_step``), each with its Gymnasium ``_key`` mask;
they differ from Gymnasium's per-task keys. Observations are ``(num_envs, obs_dim)`` float64.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

__all__ = ["ENVPOOL_TASKS", "EnvPoolVectorEnv", "envpool_installed", "envpool_supports"]

#: The Gymnasium ids EnvPool runs with the same spaces, dynamics and step semantics
#: (tests/test_envpool.py checks each against Gymnasium's own env).
ENVPOOL_TASKS: tuple[str, ...] = (
    "Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "HumanoidStandup-v5", "InvertedDoublePendulum-v5",
    "InvertedPendulum-v5", "Pusher-v5", "Reacher-v5", "Swimmer-v5", "Walker2d-v5",
)

#: Keyword arguments of ``make_vec`` the adapter understands (anything else: Gymnasium's vector env).
_KWARGS = frozenset({"max_episode_steps"})
#: EnvPool's ``max_episode_steps`` for the pool: never reached (the adapter applies the limit).
_NO_LIMIT = 2**31 - 1


def envpool_installed() -> bool:
    """True where the ``envpool`` package can be imported (checked without importing it)."""
    return importlib.util.find_spec("envpool") is not None


def envpool_supports(env_id: str, kwargs: dict[str, Any] | None = None) -> bool:
    """True for an id of :data:`ENVPOOL_TASKS` made with no keyword arguments besides
    ``max_episode_steps`` (e.g. a ``render_mode`` needs Gymnasium's env)."""
    return env_id in ENVPOOL_TASKS and set(kwargs or {}) <= _KWARGS


def _default_threads(num_envs: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(num_envs, cores))


class EnvPoolVectorEnv(VectorEnv):
    """``num_envs`` copies of the MuJoCo task ``env_id`` stepped by one EnvPool pool.

    :param env_id: one of :data:`ENVPOOL_TASKS`.
    :param num_envs: batch size ``N``; observations ``(N, obs_dim)`` float64, actions
        ``(N, act_dim)``, rewards ``(N,)`` float64, flags ``(N,)`` bool.
    :param max_episode_steps: time limit (truncation); None: the id's registered limit.
    :param num_threads: EnvPool worker threads (None: one per usable core, at most ``N``).
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, env_id: str, num_envs: int, *, max_episode_steps: int | None = None,
                 num_threads: int | None = None) -> None:
        import envpool

        if env_id not in ENVPOOL_TASKS:
            raise ValueError(f"EnvPool adapter runs {', '.join(ENVPOOL_TASKS)}; got {env_id!r}")
        limit = gym.spec(env_id).max_episode_steps if max_episode_steps is None else int(max_episode_steps)
        self._limit = int(limit)  # applied in step(); the pool itself never truncates
        self._options = {"num_envs": int(num_envs), "max_episode_steps": _NO_LIMIT,
                         "num_threads": _default_threads(num_envs) if num_threads is None else int(num_threads)}
        self._envpool = envpool
        self.env_id, self.num_envs = env_id, int(num_envs)
        spec = envpool.make_spec(env_id, **self._options)
        self.single_observation_space = spec.gymnasium_observation_space
        box = spec.gymnasium_action_space  # Gymnasium's MuJoCo envs declare float32 actions
        self.single_action_space = spaces.Box(box.low.astype(np.float32), box.high.astype(np.float32),
                                              dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.spec = gym.spec(env_id)
        self.pool: Any = None
        self._to_reset = np.zeros(self.num_envs, dtype=bool)  # truncated by the limit, reset next step

    def _build(self, seed: int | Sequence[int] | None) -> None:
        """A new pool seeded ``seed`` (env ``i``: ``seed + i``), a per-env list, or a random seed."""
        if self.pool is not None:
            self.pool.close()
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] & 0x7FFFFFFF)
        if isinstance(seed, (int, np.integer)):
            options = {"seed": int(seed)}
        else:
            seeds = [int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset(seed=list) needs {self.num_envs} seeds, got {len(seeds)}")
            options = {"seed": 0, "env_seed": seeds}
        self.pool = self._envpool.make(self.env_id, env_type="gymnasium", **self._options, **options)

    def reset(self, *, seed: int | Sequence[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a fresh episode in every env; ``seed`` as in the module docstring."""
        if options:
            raise ValueError(f"EnvPoolVectorEnv.reset takes no options, got {sorted(options)}")
        super().reset(seed=seed if isinstance(seed, (int, np.integer)) or seed is None else None)
        if seed is not None or self.pool is None:
            self._build(seed)
        obs, info = self.pool.reset()
        self._to_reset = np.zeros(self.num_envs, dtype=bool)
        return obs, self._info(info)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every env (``actions`` ``(N, act_dim)``; next-step autoreset).

        EnvPool's own time limit reports an episode that terminates on its last step as
        truncated only, so the pool runs without one and the limit is applied here: an env
        truncated but not terminated is reset by the next step (EnvPool resets the
        terminated ones itself).
        """
        if self.pool is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        actions = np.asarray(actions)
        if not self._to_reset.any():
            obs, reward, terminated, _, info = self.pool.step(actions)
        else:
            obs, reward, terminated, info = self._step_and_reset(actions, self._to_reset)
        truncated = info["elapsed_step"] >= self._limit
        self._to_reset = truncated & ~terminated
        return obs, reward.astype(np.float64), terminated, truncated, self._info(info)

    def _step_and_reset(self, actions: np.ndarray, resetting: np.ndarray) -> tuple[np.ndarray, ...]:
        """Step the envs not in ``resetting`` and reset those (reward 0, not terminated)."""
        obs = np.zeros((self.num_envs, *self.single_observation_space.shape),
                       dtype=self.single_observation_space.dtype)
        reward, terminated, info = np.zeros(self.num_envs), np.zeros(self.num_envs, dtype=bool), {}

        def place(part_obs: np.ndarray, part_info: dict[str, Any]) -> np.ndarray:
            ids = part_info["env_id"]
            obs[ids] = part_obs
            for key, value in part_info.items():
                if isinstance(value, np.ndarray) and value.shape[:1] == ids.shape:
                    info.setdefault(key, np.zeros((self.num_envs, *value.shape[1:]), dtype=value.dtype))[ids] = value
            return ids

        stepping = np.flatnonzero(~resetting)
        if stepping.size:
            part_obs, part_reward, part_terminated, _, part_info = self.pool.step(actions[stepping], env_id=stepping)
            ids = place(part_obs, part_info)
            reward[ids], terminated[ids] = part_reward, part_terminated
        place(*self.pool.reset(env_id=np.flatnonzero(resetting)))
        return obs, reward, terminated, info

    @property
    def max_episode_steps(self) -> int:
        """The time limit: an episode is truncated after this many steps."""
        return self._limit

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        """EnvPool's per-env info arrays, each with Gymnasium's ``_key`` mask (all True)."""
        out: dict[str, Any] = {}
        for key, value in info.items():
            if key in ("players", "env_id"):
                continue
            out[key] = value
            out[f"_{key}"] = np.ones(self.num_envs, dtype=bool)
        return out

    def close_extras(self, **kwargs: Any) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
