"""EnvPool's MuJoCo tasks (steinrl.envs.envpool) against Gymnasium's own envs of the same id.

The reference is always Gymnasium: its spaces, its env stepped from the same MuJoCo state,
its documented step semantics (time-limit truncation, next-step autoreset, reset noise) and,
for a fixed policy, its return distribution. Skipped where EnvPool or MuJoCo is absent (the
``test`` extra installs both).
"""

from __future__ import annotations

import numpy as np
import pytest

envpool = pytest.importorskip("envpool", reason="needs the envpool extra")
pytest.importorskip("mujoco", reason="needs the mujoco extra")

import gymnasium as gym
from scipy import stats

from steinrl import envs
from steinrl.envs.envpool import ENVPOOL_TASKS, EnvPoolVectorEnv
from steinrl.errors import ConfigError


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """MuJoCo writes its warnings (Ant's XML: 'settotalmass is deprecated') to MUJOCO_LOG.TXT
    in the working directory: keep it out of the repository."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("env_id", ENVPOOL_TASKS)
def test_spaces_limits_and_autoreset_mode_are_gymnasiums(env_id):
    ref = gym.make(env_id)
    pool = EnvPoolVectorEnv(env_id, 3)
    assert pool.single_observation_space == ref.observation_space
    assert pool.single_action_space == ref.action_space  # float32 Box with the same bounds
    assert pool.observation_space == gym.vector.utils.batch_space(ref.observation_space, 3)
    assert pool.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert pool.max_episode_steps == ref.spec.max_episode_steps
    obs, _ = pool.reset(seed=0)
    assert obs.shape == (3, *ref.observation_space.shape) and obs.dtype == ref.observation_space.dtype
    _, reward, terminated, truncated, _ = pool.step(pool.action_space.sample())
    assert reward.dtype == np.float64 and terminated.dtype == truncated.dtype == bool
    pool.close()
    ref.close()


def _state(env_id, obs, info, i, model):
    """The MuJoCo (qpos, qvel) behind EnvPool's observation ``obs`` of env ``i`` (see each
    task's ``_get_obs``; the x / y position the observation leaves out comes from ``info``)."""
    if env_id == "InvertedPendulum-v5":
        return obs[:2], obs[2:4]
    if env_id == "InvertedDoublePendulum-v5":  # [x, sin q1, sin q2, cos q1, cos q2, qvel, ...]
        return np.array([obs[0], np.arctan2(obs[1], obs[3]), np.arctan2(obs[2], obs[4])]), obs[5:8]
    if env_id == "Reacher-v5":  # [cos q, sin q, target, joint velocities, ...]; the target is still
        return np.concatenate([np.arctan2(obs[2:4], obs[0:2]), obs[4:6]]), np.concatenate([obs[6:8], [0.0, 0.0]])
    # HumanoidStandup's info has no position: its dynamics do not depend on x, y
    dropped = [0.0, 0.0] if env_id == "HumanoidStandup-v5" else [info[k][i] for k in ("x_position", "y_position")
                                                                  if k in info]
    qpos = np.concatenate([dropped, obs[: model.nq - len(dropped)]])
    return qpos, obs[model.nq - len(dropped): model.nq - len(dropped) + model.nv]


#: Tasks whose observation holds the whole MuJoCo state and whose dynamics do not carry a
#: contact solver's warm start from step to step, so Gymnasium's env set to that state
#: must reproduce EnvPool's next step exactly.
EXACT = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Swimmer-v5", "InvertedPendulum-v5",
         "InvertedDoublePendulum-v5", "Reacher-v5")


@pytest.mark.parametrize("env_id", EXACT)
def test_every_transition_is_gymnasiums_from_the_same_state(env_id):
    """40 steps of 8 envs under random actions: Gymnasium's env, set to the state behind each
    observation, gives the same next observation, reward and termination; the step after an
    episode ends is a reset (reward 0, neither flag)."""
    N = 8
    pool = EnvPoolVectorEnv(env_id, N)
    ref = gym.make(env_id).unwrapped
    ref.reset(seed=0)
    rng = np.random.default_rng(1)
    obs, info = pool.reset(seed=1)
    ended = np.zeros(N, dtype=bool)
    checked = resets = 0
    for _ in range(40):
        action = (rng.uniform(-1, 1, (N, *pool.single_action_space.shape))
                  * pool.single_action_space.high).astype(np.float32)
        next_obs, reward, terminated, truncated, next_info = pool.step(action)
        for i in range(N):
            if ended[i]:  # autoreset step
                assert reward[i] == 0.0 and not terminated[i] and not truncated[i]
                resets += 1
                continue
            qpos, qvel = _state(env_id, obs[i], info, i, ref.model)
            if env_id in ("Hopper-v5", "Walker2d-v5") and np.abs(qvel).max() >= 10.0:
                continue  # the observation clips velocities to +-10: the state is not in it
            ref.set_state(qpos, qvel)
            ref_obs, ref_reward, ref_terminated, _, _ = ref.step(action[i])
            np.testing.assert_allclose(next_obs[i], ref_obs, rtol=0, atol=1e-6)
            assert reward[i] == pytest.approx(ref_reward, rel=1e-6, abs=1e-6)  # EnvPool returns float32 rewards
            assert terminated[i] == ref_terminated
            checked += 1
        obs, info, ended = next_obs, next_info, terminated | truncated
    assert checked >= 60  # (Walker2d often exceeds the clipped velocities)
    if env_id in ("Hopper-v5", "Walker2d-v5"):
        assert resets > 0  # these fall under random actions: the reset step was exercised
    pool.close()


@pytest.mark.parametrize("env_id", ["Ant-v5", "Humanoid-v5", "HumanoidStandup-v5"])
def test_first_step_of_contact_tasks_is_gymnasiums(env_id):
    """Contact-rich tasks: from a fresh episode (no solver warm start on either side) the first
    step matches Gymnasium's; later steps differ by the solver's warm start (the return
    distribution test covers them)."""
    import mujoco

    N = 6
    pool = EnvPoolVectorEnv(env_id, N)
    ref = gym.make(env_id).unwrapped
    ref.reset(seed=0)
    obs, info = pool.reset(seed=2)
    action = (np.random.default_rng(3).uniform(-1, 1, (N, *pool.single_action_space.shape))
              * pool.single_action_space.high).astype(np.float32)
    next_obs, reward, terminated, _, _ = pool.step(action)
    k = ref.model.nq + ref.model.nv - 2  # the position and velocity part of the observation
    for i in range(N):
        mujoco.mj_resetData(ref.model, ref.data)
        ref.set_state(*_state(env_id, obs[i], info, i, ref.model))
        ref_obs, ref_reward, ref_terminated, _, _ = ref.step(action[i])
        np.testing.assert_allclose(next_obs[i, :k], ref_obs[:k], rtol=0, atol=1e-4)
        assert reward[i] == pytest.approx(ref_reward, rel=1e-3, abs=1e-3)
        assert terminated[i] == ref_terminated
    pool.close()


def test_truncation_and_autoreset_match_gymnasiums_vector_env():
    """InvertedPendulum at a 5-step limit under zero actions: the same flags and zero rewards
    as Gymnasium's SyncVectorEnv step by step, and every reset observation inside the reset
    noise (+-0.01 on qpos and qvel)."""
    pool = envs.make_vec("InvertedPendulum-v5", 4, vectorization_mode="envpool", max_episode_steps=5)
    ref = envs.make_vec("InvertedPendulum-v5", 4, vectorization_mode="sync", max_episode_steps=5)
    assert isinstance(pool, EnvPoolVectorEnv) and not isinstance(ref, EnvPoolVectorEnv)
    pool.reset(seed=0)
    ref.reset(seed=0)
    zero = np.zeros((4, 1), dtype=np.float32)
    for t in range(13):
        obs, reward, terminated, truncated, _ = pool.step(zero)
        _, ref_reward, ref_terminated, ref_truncated, _ = ref.step(zero)
        np.testing.assert_array_equal(terminated, ref_terminated)
        np.testing.assert_array_equal(truncated, ref_truncated)
        np.testing.assert_array_equal(reward == 0.0, ref_reward == 0.0)
        assert truncated.all() == (t % 6 == 4)  # steps 5 and 11 of each episode cycle end it
        if t % 6 == 5:  # the reset step
            assert np.abs(obs).max() <= 0.01 and (reward == 0).all()
    pool.close()
    ref.close()


def test_termination_at_the_time_limit_reports_both_flags():
    """Gymnasium's TimeLimit: an episode that terminates on its last allowed step is
    terminated and truncated; the next step resets it to Hopper's initial state (+-0.005)."""
    action = np.random.default_rng(0).uniform(-1, 1, (200, 2, 3)).astype(np.float32)

    def first_end(pool):
        pool.reset(seed=5)
        for t in range(200):
            _, _, terminated, truncated, _ = pool.step(action[t])
            if terminated[0] or truncated[0]:
                return t + 1, terminated[0], truncated[0], pool.step(action[t + 1])
        raise AssertionError("Hopper did not fall under random actions in 200 steps")

    steps, terminated, truncated, _ = first_end(EnvPoolVectorEnv("Hopper-v5", 2))
    assert terminated and not truncated and steps < 200
    steps2, terminated, truncated, after = first_end(EnvPoolVectorEnv("Hopper-v5", 2, max_episode_steps=steps))
    assert (steps2, terminated, truncated) == (steps, True, True)
    obs, reward, *flags, _ = after
    initial = np.r_[1.25, np.zeros(10)]  # Hopper-v5's init_qpos[1:] and zero qvel
    assert reward[0] == 0.0 and not flags[0][0] and not flags[1][0]
    assert np.abs(obs[0] - initial).max() <= 0.005 + 1e-12


def test_seeded_resets_replay_and_follow_gymnasiums_convention():
    """reset(seed=s) replays the same episodes; env i is seeded s + i (a pool of 2 seeded 12
    starts as envs 2 and 3 of a pool of 4 seeded 10); a list seeds each env."""
    actions = np.random.default_rng(0).uniform(-1, 1, (30, 4, 3)).astype(np.float32)
    pool = EnvPoolVectorEnv("Hopper-v5", 4)

    def trajectory(seed):
        obs = [pool.reset(seed=seed)[0]]
        obs += [pool.step(a)[0] for a in actions]
        return np.stack(obs)

    first = trajectory(10)
    np.testing.assert_array_equal(trajectory(10), first)
    assert not np.allclose(trajectory(11)[0], first[0])
    np.testing.assert_array_equal(EnvPoolVectorEnv("Hopper-v5", 2).reset(seed=12)[0], first[0, 2:])
    np.testing.assert_array_equal(pool.reset(seed=[12, 13, 10, 11])[0], first[0, [2, 3, 0, 1]])
    unseeded = pool.reset()[0]  # continues the streams: a new start
    assert not np.allclose(unseeded, first[0])


def _first_episode_returns(venv, seed, horizon):
    """Return of each env's first episode under a fixed stochastic linear policy
    (a = clip(tanh(W obs) + 0.1 noise), W and the noise from fixed seeds)."""
    N = venv.num_envs
    space = venv.single_action_space
    obs_dim, act_dim = venv.single_observation_space.shape[0], space.shape[0]
    W = np.random.default_rng(123).normal(0, 0.1, (obs_dim, act_dim))
    noise = np.random.default_rng(seed)
    obs, _ = venv.reset(seed=seed)
    total, done = np.zeros(N), np.zeros(N, dtype=bool)
    for _ in range(horizon):
        action = np.clip(np.tanh(obs @ W) + 0.1 * noise.normal(size=(N, act_dim)), -1, 1) * space.high
        obs, reward, terminated, truncated, _ = venv.step(action.astype(np.float32))
        total += reward * ~done
        done |= terminated | truncated
        if done.all():
            break
    assert done.all()
    return total


#: The contact-rich (slow) tasks get 32 episodes of at most 20 steps, the others 64 of 30.
HEAVY = ("Ant-v5", "Humanoid-v5", "HumanoidStandup-v5")


@pytest.mark.parametrize("env_id", ENVPOOL_TASKS)
def test_a_fixed_policy_has_gymnasiums_return_distribution(env_id):
    """Each side's episodes under the same fixed policy: a two-sample KS test and Welch's
    t-test cannot tell EnvPool's returns from Gymnasium's (p > 0.001). Measured sensitivity:
    Gymnasium's Humanoid with a 5% larger healthy reward gives p ~ 1e-12 (a failure); the
    same on Hopper, or Pusher's reward_near_weight 0.55 for 0.5, p ~ 0.01 (a pass): small
    reward changes are for the transition tests above to catch."""
    episodes, horizon = (32, 20) if env_id in HEAVY else (64, 30)
    pool = _first_episode_returns(envs.make_vec(env_id, episodes, vectorization_mode="envpool",
                                                max_episode_steps=horizon), 1, horizon)
    ref = _first_episode_returns(envs.make_vec(env_id, episodes, vectorization_mode="sync",
                                               max_episode_steps=horizon), 2, horizon)
    assert stats.ks_2samp(pool, ref).pvalue > 1e-3
    assert stats.ttest_ind(pool, ref, equal_var=False).pvalue > 1e-3


def test_make_vec_picks_envpool_where_it_runs_the_id():
    assert isinstance(envs.make_vec("Hopper-v5", 2, vectorization_mode="auto"), EnvPoolVectorEnv)
    assert isinstance(envs.make_vec("Hopper-v5", 2), gym.vector.SyncVectorEnv)  # the plain default stays sync
    rendered = envs.make_vec("Hopper-v5", 2, vectorization_mode="auto", render_mode="rgb_array")
    assert isinstance(rendered, gym.vector.SyncVectorEnv)  # EnvPool has no Gymnasium render_mode
    assert not isinstance(envs.make_vec("CartPole-v1", 2, vectorization_mode="auto"), EnvPoolVectorEnv)
    assert type(envs.make_vec("Cartpole", 2, vectorization_mode="auto")).__name__ == "CartpoleVectorEnv"
    with pytest.raises(ConfigError, match="vectorization envpool cannot run CartPole-v1.*Hopper-v5"):
        envs.make_vec("CartPole-v1", 2, vectorization_mode="envpool")


def test_training_runs_on_envpool_and_is_reproducible():
    """The default vectorization (auto) trains Hopper-v5 on EnvPool; the same seed gives the
    same returns."""
    from conftest import tiny_config

    import steinrl

    def returns():
        trainer = steinrl.Trainer(tiny_config("svgd-a2c", "Hopper-v5"))
        assert isinstance(trainer.job.envs, EnvPoolVectorEnv)
        rows = [trainer.step() for _ in range(2)]
        trainer.close()
        return [r["rollout/ep_rew_mean"] for r in rows]

    first = returns()
    assert np.isfinite(first).all() and first == returns()
