"""Vector and single envs agree: same seed and actions give the same observations,
rewards and done flags, across next-step autoresets and truncations; and a vector env
of 8 agrees with 8 single envs started from the same injected states."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from steinrl.envs import (
    SHORT_NAMES,
    CartpoleEnv,
    CartpoleSwingUpEnv,
    CartpoleSwingUpVectorEnv,
    CartpoleVectorEnv,
    DoublePendulumEnv,
    DoublePendulumVectorEnv,
)

PAIRS = {
    "Cartpole": (CartpoleEnv, CartpoleVectorEnv),
    "CartpoleSwingUp": (CartpoleSwingUpEnv, CartpoleSwingUpVectorEnv),
    "DoublePendulum": (DoublePendulumEnv, DoublePendulumVectorEnv),
}
# Same code on batch 1 in both: agreement is to the last bit in practice; allow 1e-12.
TOL = {"rtol": 1e-12, "atol": 1e-12}


# Per task: (mean, std) of the Gaussian actions and max_episode_steps, chosen so that
# 300 steps contain both terminations and truncations (the double pendulum never
# terminates).
EPISODE_SETUP = {
    "Cartpole": (0.0, 1.0, 12),
    "CartpoleSwingUp": (0.6, 0.6, 25),
    "DoublePendulum": (0.0, 0.6, 12),
}


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("via_make", [False, True])
def test_vector_with_one_env_matches_single_env(name, via_make):
    """Step a vector env (num_envs=1) and a single env with the same seed and actions;
    when the vector env autoresets, the single env calls reset() (no seed). Episodes end
    by termination and by truncation at max_episode_steps."""
    single_cls, vector_cls = PAIRS[name]
    mean, std, max_steps = EPISODE_SETUP[name]
    if via_make:
        single = gym.make(SHORT_NAMES[name], max_episode_steps=max_steps)
        vec = gym.make_vec(
            SHORT_NAMES[name], 1, vectorization_mode="vector_entry_point", max_episode_steps=max_steps
        )
    else:
        single = single_cls(max_episode_steps=max_steps)
        vec = vector_cls(num_envs=1, max_episode_steps=max_steps)
    actions = np.clip(np.random.default_rng(7).normal(mean, std, size=(300, 1)), -1.5, 1.5).astype(np.float32)
    obs_v, _ = vec.reset(seed=123)
    obs_s, _ = single.reset(seed=123)
    np.testing.assert_allclose(obs_v[0], obs_s, **TOL)
    done = False
    counts = {"terminated": 0, "truncated": 0, "autoreset": 0}
    for a in actions:
        obs_v, rew_v, term_v, trunc_v, _ = vec.step(a[None, :])
        if done:  # vector env autoresets on this step; the single env is reset by hand
            obs_s, _ = single.reset()
            rew_s, term_s, trunc_s = 0.0, False, False
            counts["autoreset"] += 1
        else:
            obs_s, rew_s, term_s, trunc_s, _ = single.step(a)
        np.testing.assert_allclose(obs_v[0], obs_s, **TOL)
        assert rew_v[0] == pytest.approx(rew_s, rel=1e-12, abs=1e-12)
        assert (bool(term_v[0]), bool(trunc_v[0])) == (term_s, trunc_s)
        counts["terminated"] += term_s
        counts["truncated"] += trunc_s and not term_s
        done = term_s or trunc_s
    assert counts["autoreset"] >= 10 and counts["truncated"] >= 1, counts
    if name != "DoublePendulum":
        assert counts["terminated"] >= 5, counts


def _injected_states(name: str, rng: np.random.Generator) -> np.ndarray:
    """8 states ``(8, 4)``; for the cart-poles env 2 and env 5 are about to terminate."""
    if name == "DoublePendulum":
        return rng.normal(0.0, [1.5, 1.5, 3.0, 3.0], size=(8, 4))
    if name == "Cartpole":
        states = rng.uniform([-2.0, -1.0, -0.1, -1.0], [2.0, 1.0, 0.1, 1.0], size=(8, 4))
        states[2] = [2.399, 3.0, 0.0, 0.0]  # cart leaves the track
        states[5] = [0.0, 0.0, 0.199, 2.0]  # pole falls past 0.2 rad
    else:
        states = rng.uniform([-2.5, -2.0, 0.0, -3.0], [2.5, 2.0, 2 * math.pi, 3.0], size=(8, 4))
        states[2] = [2.999, 3.0, 3.0, 0.0]  # cart leaves the track
        states[5] = [-2.999, -3.0, 0.0, 0.0]
    return states


@pytest.mark.parametrize("name", list(PAIRS))
def test_vector_of_8_matches_8_single_envs_from_injected_states(name):
    """Inject the same 8 states into a vector env and 8 single envs and step with the same
    actions: results agree. On the next step the envs that ended are autoreset (reward 0,
    not done, obs = fresh reset state), and the others keep matching their single twins."""
    single_cls, vector_cls = PAIRS[name]
    rng = np.random.default_rng(11)
    states = _injected_states(name, rng)
    actions = rng.uniform(-1.2, 1.2, size=(2, 8, 1)).astype(np.float32)

    vec = vector_cls(num_envs=8, max_episode_steps=500)
    vec.reset(seed=0)
    vec.state = states.T
    singles = [single_cls() for _ in range(8)]
    for env, s in zip(singles, states):
        env.reset(seed=0)
        env.state = s
    obs_v, rew_v, term_v, trunc_v, _ = vec.step(actions[0])
    for i, env in enumerate(singles):
        obs_s, rew_s, term_s, trunc_s, _ = env.step(actions[0, i])
        np.testing.assert_allclose(obs_v[i], obs_s, **TOL)
        np.testing.assert_allclose(vec.state[:, i], env.state, **TOL)
        assert rew_v[i] == pytest.approx(rew_s, rel=1e-12, abs=1e-12)
        assert (term_v[i], trunc_v[i]) == (term_s, trunc_s)
    ended = term_v | trunc_v
    if name == "DoublePendulum":
        assert not ended.any()
    else:
        assert ended[2] and ended[5] and ended.sum() == 2, ended

    reset_low, reset_high = {
        "Cartpole": (-0.05 * np.array([2.4, 4, 0.2, 4]), 0.05 * np.array([2.4, 4, 0.2, 4])),
        "CartpoleSwingUp": (np.array([-1, -2, math.pi - 1, -3]), np.array([1, 2, math.pi + 1, 3])),
        "DoublePendulum": (np.full(4, -1.0), np.full(4, 1.0)),
    }[name]
    obs_v, rew_v, term_v, trunc_v, _ = vec.step(actions[1])
    for i, env in enumerate(singles):
        if ended[i]:
            assert rew_v[i] == 0.0 and not term_v[i] and not trunc_v[i]
            np.testing.assert_array_equal(obs_v[i], vec.state[:, i].astype(np.float32))
            assert ((vec.state[:, i] >= reset_low) & (vec.state[:, i] <= reset_high)).all()
            continue
        obs_s, rew_s, term_s, trunc_s, _ = env.step(actions[1, i])
        np.testing.assert_allclose(obs_v[i], obs_s, **TOL)
        assert rew_v[i] == pytest.approx(rew_s, rel=1e-12, abs=1e-12)
        assert (term_v[i], trunc_v[i]) == (term_s, trunc_s)


def test_autoreset_reproduces_seeded_reset_stream():
    """With num_envs envs all truncating at once, the autoreset draws continue the
    generator exactly as the initial reset: env i takes draws 4i..4i+3."""
    vec = CartpoleVectorEnv(num_envs=5, max_episode_steps=1)
    obs0, _ = vec.reset(seed=3)
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(3)))
    high = 0.05 * np.array([2.4, 4.0, 0.2, 4.0])
    np.testing.assert_array_equal(obs0, gen.uniform(-high, high, size=(5, 4)).astype(np.float32))
    zero = np.zeros((5, 1), np.float32)
    _, _, _, truncated, _ = vec.step(zero)
    assert truncated.all()
    obs1, reward, terminated, truncated, _ = vec.step(zero)
    assert not (reward.any() or terminated.any() or truncated.any())
    np.testing.assert_array_equal(obs1, gen.uniform(-high, high, size=(5, 4)).astype(np.float32))
    # A single env consumes the same stream one reset at a time.
    single = CartpoleEnv()
    first = [single.reset(seed=3)[0]] + [single.reset()[0] for _ in range(4)]
    np.testing.assert_array_equal(np.array(first), obs0)
