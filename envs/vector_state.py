"""Saving and restoring a Gymnasium ``SyncVectorEnv`` exactly, where its envs allow it.

Continuing sampling carries episodes across iterations, so a checkpoint must hold where
every env stands for a resumed run to continue exactly. steinrl's own vector envs have
``get_state`` / ``set_state``; Gymnasium's synchronous vector env has none. This module
gives it one when each of its envs is one whose state is known:

- MuJoCo envs (``unwrapped.model`` / ``unwrapped.data``): the whole integration state
  (``mujoco.mj_getState`` with ``mjSTATE_INTEGRATION``: time, positions, velocities,
  actuator activations, controls, warm-start accelerations, ...);
- classic-control envs with a ``state`` array (Pendulum, MountainCarContinuous, CartPole).

plus, for every env, its ``TimeLimit`` step count and its random generator (resets draw
from it), and the vector env's pending next-step autoresets. Arrays are returned as
numpy arrays and plain data.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["sync_state_supported", "get_sync_state", "set_sync_state"]

_INTEGRATION = None


def _integration_spec() -> Any:
    global _INTEGRATION
    if _INTEGRATION is None:
        import mujoco

        _INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION
    return _INTEGRATION


def _time_limit(env: gym.Env) -> gym.Env | None:
    while True:
        if isinstance(env, gym.wrappers.TimeLimit):
            return env
        if not hasattr(env, "env"):
            return None
        env = env.env


def _mark_reset(env: gym.Env) -> None:
    """Tell the wrappers that check call order (``OrderEnforcing``, ``PassiveEnvChecker``:
    checks run on the first reset and step only) that the env was reset and stepped."""
    while True:
        if hasattr(env, "_has_reset"):
            env._has_reset = True
        for flag in ("checked_reset", "checked_step", "checked_data_reuse"):
            if hasattr(env, flag):
                setattr(env, flag, True)
        if not hasattr(env, "env"):
            return
        env = env.env


def _kind(env: gym.Env) -> str | None:
    inner = env.unwrapped
    if hasattr(inner, "model") and hasattr(inner, "data") and type(inner.model).__module__.startswith("mujoco"):
        return "mujoco"
    if hasattr(inner, "state"):  # (None before the first reset)
        return "array"
    return None


def sync_state_supported(venv: Any) -> bool:
    """Whether :func:`get_sync_state` can save ``venv`` (a SyncVectorEnv of known envs)."""
    return (isinstance(venv, gym.vector.SyncVectorEnv) and hasattr(venv, "_autoreset_envs")
            and all(_kind(env) is not None for env in venv.envs))


def _physics(env: gym.Env) -> np.ndarray:
    inner = env.unwrapped
    if _kind(env) == "array":
        return np.array(inner.state)  # its own dtype, restored as it was
    import mujoco

    spec = _integration_spec()
    state = np.empty(mujoco.mj_stateSize(inner.model, spec))
    mujoco.mj_getState(inner.model, inner.data, state, spec)
    return state


def _set_physics(env: gym.Env, state: np.ndarray) -> None:
    inner = env.unwrapped
    if _kind(env) != "mujoco":  # a state array (the attribute may not exist before a first reset)
        inner.state = np.array(state)
        return
    import mujoco

    mujoco.mj_setState(inner.model, inner.data, np.asarray(state, dtype=np.float64), _integration_spec())
    mujoco.mj_forward(inner.model, inner.data)  # derived quantities (positions of bodies, contacts)


def get_sync_state(venv: gym.vector.SyncVectorEnv) -> dict[str, Any]:
    """Every env's physics, step count and generator, and the pending autoresets."""
    limits = [_time_limit(env) for env in venv.envs]
    return {"physics": [_physics(env) for env in venv.envs],
            "elapsed": np.array([-1 if t is None or t._elapsed_steps is None else t._elapsed_steps for t in limits]),
            "rng": [env.unwrapped.np_random.bit_generator.state for env in venv.envs],
            "autoreset": np.array(venv._autoreset_envs, dtype=bool)}


def set_sync_state(venv: gym.vector.SyncVectorEnv, state: dict[str, Any]) -> None:
    """Continue exactly from :func:`get_sync_state`."""
    if len(state["physics"]) != venv.num_envs:
        raise ValueError(f"saved state has {len(state['physics'])} envs, this vector env {venv.num_envs}")
    for env, physics, elapsed, rng in zip(venv.envs, state["physics"], state["elapsed"], state["rng"]):
        _set_physics(env, np.asarray(physics))
        limit = _time_limit(env)
        if limit is not None and int(elapsed) >= 0:
            limit._elapsed_steps = int(elapsed)
        env.unwrapped.np_random.bit_generator.state = rng
        _mark_reset(env)
    venv._autoreset_envs = np.asarray(state["autoreset"], dtype=bool).copy()
