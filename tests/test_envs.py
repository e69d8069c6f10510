"""Gymnasium API of the control tasks: env checker, registration, name resolution,
spaces, input validation and rendering."""

from __future__ import annotations

import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import steinrl.envs as envs
from steinrl.envs import (
    SHORT_NAMES,
    CartpoleEnv,
    CartpoleRllabEnv,
    CartpoleRllabVectorEnv,
    CartpoleSwingUpEnv,
    CartpoleSwingUpRllabEnv,
    CartpoleSwingUpRllabVectorEnv,
    CartpoleSwingUpVectorEnv,
    CartpoleVectorEnv,
    DoublePendulumEnv,
    DoublePendulumVectorEnv,
    UnknownEnvError,
    is_steinrl_env,
    resolve_env_id,
)

SINGLE = {
    "Cartpole": CartpoleEnv,
    "CartpoleSwingUp": CartpoleSwingUpEnv,
    "DoublePendulum": DoublePendulumEnv,
    "CartpoleRllab": CartpoleRllabEnv,
    "CartpoleSwingUpRllab": CartpoleSwingUpRllabEnv,
}
VECTOR = {
    "Cartpole": CartpoleVectorEnv,
    "CartpoleSwingUp": CartpoleSwingUpVectorEnv,
    "DoublePendulum": DoublePendulumVectorEnv,
    "CartpoleRllab": CartpoleRllabVectorEnv,
    "CartpoleSwingUpRllab": CartpoleSwingUpRllabVectorEnv,
}
OBS_DIM = {"Cartpole": 4, "CartpoleSwingUp": 4, "DoublePendulum": 6, "CartpoleRllab": 4, "CartpoleSwingUpRllab": 4}
NAMES = list(SHORT_NAMES)


# ----------------------------------------------------------------------------------
# Env checker, registration, make / make_vec.
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_check_env_passes(name):
    with warnings.catch_warnings():
        # Unbounded velocity components are genuinely unbounded (Box with ±inf).
        warnings.filterwarnings("ignore", message=".*Box observation space (minimum|maximum) value is.*")
        warnings.filterwarnings("ignore", message=".*alternative render modes.*not having a spec.*")
        check_env(SINGLE[name]())
        made = gym.make(SHORT_NAMES[name])
        check_env(made.unwrapped)
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(made)


def test_short_names_and_ids():
    assert SHORT_NAMES == {
        "Cartpole": "steinrl/Cartpole-v0",
        "CartpoleSwingUp": "steinrl/CartpoleSwingUp-v0",
        "DoublePendulum": "steinrl/DoublePendulum-v0",
        "CartpoleRllab": "steinrl/CartpoleRllab-v0",
        "CartpoleSwingUpRllab": "steinrl/CartpoleSwingUpRllab-v0",
    }
    for name, env_id in SHORT_NAMES.items():
        assert env_id in gym.registry
        spec = gym.spec(env_id)
        assert spec.max_episode_steps == 500 and spec.vector_entry_point is not None
        assert resolve_env_id(name) == env_id and resolve_env_id(env_id) == env_id
        assert is_steinrl_env(name) and is_steinrl_env(env_id)
    assert not is_steinrl_env("CartPole-v1")


@pytest.mark.parametrize("name", NAMES)
def test_gymnasium_make_and_make_vec(name):
    env_id = SHORT_NAMES[name]
    env = gym.make(env_id)
    assert isinstance(env.unwrapped, SINGLE[name])
    obs, info = env.reset(seed=0)
    assert obs.shape == (OBS_DIM[name],) and obs.dtype == np.float32 and info == {}
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)

    vec = gym.make_vec(env_id, num_envs=8, vectorization_mode="vector_entry_point")
    assert isinstance(vec, VECTOR[name]) and vec.num_envs == 8 and vec.max_episode_steps == 500
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert vec.single_action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert vec.action_space == gym.spaces.Box(-1.0, 1.0, (8, 1), np.float32)
    assert vec.single_observation_space.shape == (OBS_DIM[name],)
    assert vec.observation_space.shape == (8, OBS_DIM[name])
    obs, info = vec.reset(seed=0)
    assert obs.shape == (8, OBS_DIM[name]) and obs.dtype == np.float32
    assert vec.observation_space.contains(obs)
    obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())
    assert obs.shape == (8, OBS_DIM[name]) and obs.dtype == np.float32
    assert reward.shape == (8,) and np.issubdtype(reward.dtype, np.floating)
    assert terminated.shape == truncated.shape == (8,)
    assert terminated.dtype == truncated.dtype == np.bool_
    vec.close()

    short = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", max_episode_steps=3)
    assert short.max_episode_steps == 3


@pytest.mark.parametrize("name", NAMES)
def test_envs_make_and_make_vec(name):
    vec = envs.make_vec(name, 4, max_episode_steps=10)
    assert isinstance(vec, VECTOR[name]) and vec.num_envs == 4 and vec.max_episode_steps == 10
    single = envs.make(name)
    assert isinstance(single.unwrapped, SINGLE[name]) and single.unwrapped.max_episode_steps == 500
    long = envs.make(name, max_episode_steps=1000)
    assert long.spec.max_episode_steps == 1000 and long.unwrapped.max_episode_steps == 1000
    sync = envs.make_vec(name, 2, vectorization_mode="sync")
    assert isinstance(sync, gym.vector.SyncVectorEnv)


def test_other_gymnasium_ids_pass_through():
    vec = envs.make_vec("CartPole-v1", 4)
    assert isinstance(vec, gym.vector.SyncVectorEnv) and vec.num_envs == 4
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (4, 4)
    vec.close()
    for env_id in ("CartPole-v1", "Pendulum-v1", "InvertedDoublePendulum-v5"):
        assert resolve_env_id(env_id) == env_id
        assert not is_steinrl_env(env_id)
    assert envs.make("Pendulum-v1").spec.id == "Pendulum-v1"


def test_unknown_env_name():
    with pytest.raises(UnknownEnvError) as excinfo:
        resolve_env_id("cartpole")
    message = str(excinfo.value)
    for name in NAMES:
        assert name in message
    assert "Did you mean 'Cartpole'" in message
    assert "registered with Gymnasium" in message
    assert isinstance(excinfo.value, ValueError)
    with pytest.raises(UnknownEnvError, match="Valid short names: Cartpole, CartpoleSwingUp, DoublePendulum"):
        envs.make_vec("NoSuchTask", 4)
    with pytest.raises(UnknownEnvError):
        envs.make("NoSuchTask-v3")


def test_constructor_arguments():
    with pytest.raises(TypeError, match="unexpected keyword"):
        CartpoleVectorEnv(num_envs=2, bogus=1)
    with pytest.raises(ValueError, match="num_envs"):
        CartpoleVectorEnv(num_envs=0)
    with pytest.raises(ValueError, match="render_mode"):
        CartpoleVectorEnv(num_envs=2, render_mode="human")


# ----------------------------------------------------------------------------------
# Bad input.
# ----------------------------------------------------------------------------------
BAD_DTYPES = [
    np.array([[1]], dtype=np.int64),
    np.array([[True]]),
    np.array([[0.5]], dtype=object),
    np.array([["0.5"]]),
    np.array([[0.5 + 0j]]),
]


@pytest.mark.parametrize("name", NAMES)
def test_bad_actions_vector(name):
    env = VECTOR[name](num_envs=3)
    env.reset(seed=0)
    before = env.state.copy()
    cls = f"{name}VectorEnv"
    nan = np.zeros((3, 1), np.float32)
    nan[1, 0] = np.nan
    with pytest.raises(ValueError, match=rf"{cls}.*non-finite.*indices \[1\].*shape \(3, 1\) or \(3,\)"):
        env.step(nan)
    with pytest.raises(ValueError, match=rf"{cls}.*non-finite.*indices \[2\]"):
        env.step(np.array([0.0, 0.0, -np.inf]))
    for shape in [(3, 2), (2, 1), (1,), (3, 1, 1), ()]:
        with pytest.raises(ValueError, match=rf"{cls}.*wrong shape.*received shape {re.escape(str(shape))}"):
            env.step(np.zeros(shape, np.float32))
    for bad in BAD_DTYPES:
        bad = np.broadcast_to(bad, (3, 1))
        with pytest.raises(ValueError, match=rf"{cls}.*dtype {bad.dtype} is not floating.*float16/32/64"):
            env.step(bad)
    with pytest.raises(ValueError, match="not array-like|is not floating"):
        env.step([[0.1], [0.2, 0.3], [0.4]])
    np.testing.assert_array_equal(env.state, before)  # rejected actions change nothing
    for dtype in (np.float16, np.float32, np.float64):
        env.step(np.zeros((3, 1), dtype))
        env.step(np.zeros(3, dtype))
    env.step([[0.1], [0.2], [0.3]])  # nested float lists are fine too
    env.step(np.array([[1e300], [-1e300], [0.0]]))  # huge but finite: clipped
    assert np.isfinite(env.state).all()


@pytest.mark.parametrize("name", NAMES)
def test_bad_actions_single(name):
    env = SINGLE[name]()
    env.reset(seed=0)
    before = env.state.copy()
    expected = r"Expected.*shape \(1,\).*received shape \(1,\), dtype float32"
    with pytest.raises(ValueError, match=rf"{name}.*non-finite.*{expected}"):
        env.step(np.array([np.nan], np.float32))
    with pytest.raises(ValueError, match=rf"{name}.*non-finite"):
        env.step(np.array([np.inf]))
    for shape in [(2,), (1, 1), ()]:
        with pytest.raises(ValueError, match=rf"{name}.*wrong shape"):
            env.step(np.zeros(shape, np.float32))
    for bad in BAD_DTYPES:
        with pytest.raises(ValueError, match=rf"{name}.*is not floating"):
            env.step(bad.reshape(1))
    with pytest.raises(ValueError, match=rf"{name}.*is not floating"):
        env.step([1])  # a Python int list is an int array
    np.testing.assert_array_equal(env.state, before)
    for dtype in (np.float16, np.float32, np.float64):
        env.step(np.zeros(1, dtype))


# ----------------------------------------------------------------------------------
# Rendering.
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_render_rgb_array(name):
    env = SINGLE[name](render_mode="rgb_array")
    assert "rgb_array" in env.metadata["render_modes"] and env.metadata["render_fps"] > 0
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.shape[0] >= 100 and frame.shape[1] >= 100
    assert len(np.unique(frame.reshape(-1, 3) @ np.array([65536, 256, 1]))) >= 3  # background + bodies
    state = env.state.copy()
    state[0] += 0.7  # move the cart / swing link 1
    state[2 if name != "DoublePendulum" else 1] += 1.0  # tilt the pole / swing link 2
    env.state = state
    moved = env.render()
    assert moved.shape == frame.shape and (moved != frame).any(axis=2).sum() > 100
    env.state = state  # same state -> same frame
    np.testing.assert_array_equal(env.render(), moved)


def test_render_vector_and_without_mode():
    vec = CartpoleSwingUpVectorEnv(num_envs=3, render_mode="rgb_array")
    vec.reset(seed=0)
    frames = vec.render()
    assert len(frames) == 3 and all(f.dtype == np.uint8 and f.shape == frames[0].shape for f in frames)
    assert (frames[0] != frames[1]).any()
    env = CartpoleEnv()
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None
