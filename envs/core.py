"""Shared machinery for the batched control tasks: the task interface, action checking,
and the single / vector Gymnasium env classes built on top of one batched task.

Shapes (``n`` is the batch size: ``num_envs`` for a vector env, 1 for a single env):

- state: ``(state_dim, n)`` float64, a *structure of arrays*; each task unpacks its rows
  by physical name (e.g. ``x, x_dot, theta, theta_dot = state``), like Gymnasium's
  ``CartPoleVectorEnv``.
- action: ``(n,)`` float64 after scaling and clipping to physical units (N or N·m).
- observation: ``(n, obs_dim)`` float32.
- reward: ``(n,)`` float64; terminated / truncated: ``(n,)`` bool.

The dynamics, reward, termination and reset distribution of a task live in one
:class:`BatchedTask`; the single env calls exactly the same code with ``n = 1``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

#: Every task has one continuous action in [-1, 1], scaled linearly to a force / torque.
ACTION_LOW, ACTION_HIGH = -1.0, 1.0
#: Episode length of the papers' tasks (time-limit truncation, not termination).
DEFAULT_MAX_EPISODE_STEPS = 500
#: ``max_episode_steps`` value meaning "never truncate".
NO_STEP_LIMIT = np.iinfo(np.int64).max


class BatchedTask(ABC):
    """Dynamics, reward, termination and reset distribution of a control task on a batch.

    Subclasses define the class constants below and implement :meth:`sample_initial_state`,
    :meth:`step` and :meth:`observe`. An instance owns scratch buffers for a fixed batch
    size ``n`` so that :meth:`step` allocates nothing.

    :param num_envs: batch size ``n`` of the arrays passed to :meth:`step` and :meth:`observe`.
    """

    #: Name used in error messages (e.g. ``"Cartpole"``).
    name: ClassVar[str]
    #: Rows of the state array.
    state_dim: ClassVar[int]
    #: Length of one observation vector.
    obs_dim: ClassVar[int]
    #: Force / torque at action 1.0, in N or N·m (action a -> clip(a * max_action_effort)).
    max_action_effort: ClassVar[float]
    #: Simulated seconds per env step (integration dt times frame skip).
    control_dt: ClassVar[float]

    def __init__(self, num_envs: int) -> None:
        self.num_envs = int(num_envs)

    @abstractmethod
    def sample_initial_state(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` initial states, shape ``(state_dim, n)`` float64.

        Env ``i`` uses draws ``i * state_dim ... (i + 1) * state_dim - 1`` of ``rng``, so
        resetting ``n`` envs at once consumes the stream exactly like ``n`` single resets.
        """

    @abstractmethod
    def step(
        self, state: np.ndarray, effort: np.ndarray, reward: np.ndarray, terminated: np.ndarray
    ) -> None:
        """Advance ``state`` (``(state_dim, n)``, in place) by one env step under ``effort``
        (``(n,)`` force or torque in physical units, already clipped) and write the reward
        and the termination flags of the *new* state into ``reward`` / ``terminated``
        (``(n,)`` float64 / bool)."""

    @abstractmethod
    def observe(self, state: np.ndarray) -> np.ndarray:
        """Observation of ``state`` (``(state_dim, n)``), a new ``(n, obs_dim)`` float32 array."""

    @abstractmethod
    def render_frame(self, state: np.ndarray) -> np.ndarray:
        """Image of one state (``(state_dim,)``), ``(H, W, 3)`` uint8."""

    @classmethod
    def observation_bounds(cls) -> tuple[np.ndarray, np.ndarray]:
        """Low / high of one observation, ``(obs_dim,)`` float32 each (default: unbounded)."""
        high = np.full(cls.obs_dim, np.inf, dtype=np.float32)
        return -high, high


def _action_error(env_name: str, expected: str, action: Any, problem: str) -> ValueError:
    try:
        got = f"shape {np.shape(action)}, dtype {np.asarray(action).dtype}"
    except Exception:  # noqa: BLE001 - only used to describe the bad input
        got = f"an object of type {type(action).__name__}"
    return ValueError(
        f"{env_name}: invalid action ({problem}). Expected a floating-point array "
        f"(float16/32/64) of shape {expected} with finite values in [-1, 1] "
        f"(values outside are clipped); received {got}: {action!r}"
    )


def check_action(action: Any, shapes: tuple[tuple[int, ...], ...], env_name: str) -> np.ndarray:
    """Validate an action and return it as a 1-D floating array of length ``n``.

    :param action: array-like of shape ``shapes[0]`` (or any other shape in ``shapes``).
    :param shapes: accepted shapes, all with ``n`` elements.
    :param env_name: named in the error message.
    :raises ValueError: wrong shape, non-floating dtype (int, bool, object, str,
        complex, ...), or a NaN / inf entry.
    """
    if type(action) is np.ndarray:
        a = action
    else:
        try:
            a = np.asarray(action)
        except (TypeError, ValueError) as e:
            raise _action_error(env_name, _shapes_str(shapes), action, f"not array-like: {e}") from e
    if a.dtype.kind != "f":
        raise _action_error(env_name, _shapes_str(shapes), action, f"dtype {a.dtype} is not floating")
    if a.shape not in shapes:
        raise _action_error(env_name, _shapes_str(shapes), action, f"wrong shape {a.shape}")
    # One float64 reduction instead of an elementwise isfinite: a sum of finite values
    # is finite (float64 accumulator, so float16 inputs cannot overflow) while NaN and
    # inf propagate. Only if it is not finite do we look closer.
    if not math.isfinite(np.add.reduce(a, axis=None, dtype=np.float64)):
        finite = np.isfinite(a).reshape(-1)
        if not finite.all():
            bad = np.flatnonzero(~finite).tolist()
            raise _action_error(
                env_name, _shapes_str(shapes), action, f"non-finite value (NaN/inf) at flat indices {bad}"
            )
    return a.reshape(-1)


def _shapes_str(shapes: tuple[tuple[int, ...], ...]) -> str:
    return " or ".join(str(s) for s in shapes)


def _scale_and_clip(a: np.ndarray, max_effort: float, out: np.ndarray) -> np.ndarray:
    """``out = clip(a * max_effort, -max_effort, max_effort)`` in float64, ``(n,)``."""
    np.multiply(a, max_effort, out=out, dtype=np.float64)
    np.minimum(out, max_effort, out=out)
    np.maximum(out, -max_effort, out=out)
    return out


def semi_implicit_euler(
    q: np.ndarray, q_dot: np.ndarray, dv: np.ndarray, dt: float, v_min: Any, v_max: Any, scratch: np.ndarray
) -> None:
    """Box2D's integrator step, in place: velocities first, ``q_dot += dv`` clipped to
    ``[v_min, v_max]`` (Box2D's per-step motion caps as velocity limits, scalars or arrays
    broadcasting against ``q_dot``), then positions with the new velocities,
    ``q += dt · q_dot``. ``scratch`` is a work array of ``q``'s shape."""
    q_dot += dv
    np.minimum(q_dot, v_max, out=q_dot)
    np.maximum(q_dot, v_min, out=q_dot)
    np.multiply(q_dot, dt, out=scratch)
    q += scratch


def _render_frames(task: BatchedTask, state: np.ndarray) -> list[np.ndarray]:
    return [task.render_frame(state[:, i]) for i in range(state.shape[1])]


class _OneTask:
    """Base of the env classes: a subclass that sets ``task_cls`` runs that task and
    renders at its real time (``metadata["render_fps"] = 1 / task_cls.control_dt``)."""

    #: The task this env runs.
    task_cls: ClassVar[type[BatchedTask]]
    metadata: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "task_cls" in cls.__dict__:
            cls.metadata = {**cls.metadata, "render_fps": round(1 / cls.task_cls.control_dt)}


class TaskEnv(_OneTask, gym.Env[np.ndarray, np.ndarray]):
    """Single Gymnasium env around a :class:`BatchedTask` run with batch size 1.

    Observation ``(obs_dim,)`` float32; action ``(1,)`` float in [-1, 1]; reward float;
    the env truncates by itself after ``max_episode_steps`` steps. Through
    ``gymnasium.make`` a ``TimeLimit`` wrapper (registered: 500 steps) truncates too; its
    ``max_episode_steps`` argument does not reach this constructor, so use
    :func:`envs.make` (which sets both) for episodes longer than 500 steps.

    :param max_episode_steps: episode length before truncation (500 in the papers).
    :param render_mode: ``None`` or ``"rgb_array"``.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"{self.task_cls.name}: render_mode must be None or one of "
                f"{self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.task = self.task_cls(1)
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = render_mode
        low, high = self.task_cls.observation_bounds()
        self.observation_space = spaces.Box(low, high, dtype=np.float32)
        self.action_space = spaces.Box(ACTION_LOW, ACTION_HIGH, (1,), dtype=np.float32)
        self._state = np.zeros((self.task_cls.state_dim, 1))
        self._effort = np.zeros(1)
        self._reward = np.zeros(1)
        self._terminated = np.zeros(1, dtype=bool)
        self._steps = 0
        self._shapes = ((1,),)

    @property
    def state(self) -> np.ndarray:
        """Physical state, ``(state_dim,)`` float64 (a writable view)."""
        return self._state[:, 0]

    @state.setter
    def state(self, value: np.ndarray) -> None:
        self._state[:, 0] = np.asarray(value, dtype=np.float64).reshape(self.task_cls.state_dim)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._state[...] = self.task.sample_initial_state(self.np_random, 1)
        self._steps = 0
        return self.task.observe(self._state)[0], {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = check_action(action, self._shapes, self.task_cls.name)
        effort = _scale_and_clip(a, self.task_cls.max_action_effort, self._effort)
        self.task.step(self._state, effort, self._reward, self._terminated)
        self._steps += 1
        truncated = self._steps >= self.max_episode_steps
        obs = self.task.observe(self._state)[0]
        return obs, float(self._reward[0]), bool(self._terminated[0]), truncated, {}

    def render(self) -> np.ndarray | None:
        """``(H, W, 3)`` uint8 image of the current state (``render_mode="rgb_array"``)."""
        if self.render_mode is None:
            gym.logger.warn(
                f"{self.task_cls.name}: render() called without a render_mode; "
                'create the env with render_mode="rgb_array".'
            )
            return None
        return self.task.render_frame(self._state[:, 0])


class TaskVectorEnv(_OneTask, VectorEnv):
    """Vectorized Gymnasium env around a :class:`BatchedTask`: one numpy call per
    quantity for all ``num_envs`` envs, no Python loop over envs.

    Next-step autoreset (like Gymnasium's ``CartPoleVectorEnv``): on the step after an
    env terminated or was truncated, that env is reset instead of stepped and returns
    the reset observation with reward 0 and ``terminated = truncated = False``.

    Observations ``(num_envs, obs_dim)`` float32; actions ``(num_envs, 1)`` (or
    ``(num_envs,)``) float in [-1, 1]; rewards ``(num_envs,)`` float64.

    :param num_envs: number of parallel envs.
    :param max_episode_steps: episode length before truncation (500 in the papers).
    :param render_mode: ``None`` or ``"rgb_array"`` (``render()`` returns one frame per env).
    """

    metadata: dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "render_fps": 20,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        name = self.task_cls.name
        if kwargs:
            raise TypeError(f"{name}VectorEnv got unexpected keyword arguments {sorted(kwargs)}")
        if int(num_envs) < 1:
            raise ValueError(f"{name}VectorEnv: num_envs must be >= 1, got {num_envs}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"{name}VectorEnv: render_mode must be None or one of "
                f"{self.metadata['render_modes']}, got {render_mode!r}"
            )
        n = self.num_envs = int(num_envs)
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = render_mode
        self.task = self.task_cls(n)
        low, high = self.task_cls.observation_bounds()
        self.single_observation_space = spaces.Box(low, high, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, n)
        self.single_action_space = spaces.Box(ACTION_LOW, ACTION_HIGH, (1,), dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, n)

        self._state = np.zeros((self.task_cls.state_dim, n))
        self._effort = np.zeros(n)
        self._steps = np.zeros(n, dtype=np.int64)
        self._prev_done = np.zeros(n, dtype=bool)
        self._any_prev_done = False
        self._shapes = ((n, 1), (n,))
        self._name = f"{name}VectorEnv(num_envs={n})"

    @property
    def state(self) -> np.ndarray:
        """Physical state of all envs, ``(state_dim, num_envs)`` float64 (rows by name)."""
        return self._state

    @state.setter
    def state(self, value: np.ndarray) -> None:
        self._state[...] = np.asarray(value, dtype=np.float64).reshape(self._state.shape)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._state[...] = self.task.sample_initial_state(self.np_random, self.num_envs)
        self._steps[:] = 0
        self._prev_done[:] = False
        self._any_prev_done = False
        return self.task.observe(self._state), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        a = check_action(actions, self._shapes, self._name)
        effort = _scale_and_clip(a, self.task_cls.max_action_effort, self._effort)
        state, n = self._state, self.num_envs
        reward = np.empty(n)
        terminated = np.empty(n, dtype=bool)
        self.task.step(state, effort, reward, terminated)
        steps = self._steps
        steps += 1
        truncated = steps >= self.max_episode_steps

        if self._any_prev_done:  # next-step autoreset of the envs that ended last step
            reset = np.flatnonzero(self._prev_done)  # integer indices: faster than the mask
            state[:, reset] = self.task.sample_initial_state(self.np_random, reset.size)
            steps[reset] = 0
            reward[reset] = 0.0
            terminated[reset] = False
            truncated[reset] = False

        np.logical_or(terminated, truncated, out=self._prev_done)
        self._any_prev_done = bool(self._prev_done.any())
        return self.task.observe(state), reward, terminated, truncated, {}

    def get_state(self) -> dict[str, Any]:
        """Everything that decides the next steps (physical state, step counters, pending
        autoresets, the reset RNG), as arrays and plain data: a checkpoint can hold it."""
        return {"state": self._state.copy(), "steps": self._steps.copy(), "prev_done": self._prev_done.copy(),
                "rng": self.np_random.bit_generator.state}

    def set_state(self, saved: dict[str, Any]) -> None:
        """Continue exactly from :meth:`get_state`."""
        self._state[...] = np.asarray(saved["state"], dtype=np.float64).reshape(self._state.shape)
        self._steps[:] = np.asarray(saved["steps"])
        self._prev_done[:] = np.asarray(saved["prev_done"], dtype=bool)
        self._any_prev_done = bool(self._prev_done.any())
        self.np_random.bit_generator.state = saved["rng"]

    def render(self) -> list[np.ndarray] | None:
        """One ``(H, W, 3)`` uint8 frame per env (``render_mode="rgb_array"``)."""
        if self.render_mode is None:
            gym.logger.warn(
                f"{self._name}: render() called without a render_mode; "
                'create the env with render_mode="rgb_array".'
            )
            return None
        return _render_frames(self.task, self._state)


def env_classes(task_cls: type[BatchedTask], module: str) -> tuple[type[TaskEnv], type[TaskVectorEnv]]:
    """The single and the vector env of a task, ``<name>Env`` (a :class:`TaskEnv`) and
    ``<name>VectorEnv`` (a :class:`TaskVectorEnv`) with ``name = task_cls.name``.

    :param module: the ``__name__`` of the module that assigns them under those names, e.g.
        ``CartpoleEnv, CartpoleVectorEnv = env_classes(CartpoleTask, __name__)``; pickle
        and the Gymnasium entry points (``"steinrl.envs.cartpole:CartpoleEnv"``) find
        them there.
    """

    def env_class(base: type, suffix: str, kind: str) -> type:
        name = f"{task_cls.name}{suffix}"
        doc = (f"{task_cls.name}, {kind}: :class:`~{task_cls.__module__}.{task_cls.__qualname__}` "
               f"in a :class:`~{__name__}.{base.__qualname__}` (see :mod:`{module}`).")
        return type(name, (base,), {"task_cls": task_cls, "__module__": module, "__qualname__": name, "__doc__": doc})

    return (env_class(TaskEnv, "Env", "single env"),
            env_class(TaskVectorEnv, "VectorEnv", "vectorized with next-step autoreset"))
