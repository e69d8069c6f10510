"""EpisodicHopper / EpisodicWalker2d (envs/episodic_mujoco.py): Gymnasium's env checker, the
registration, and the reward rule against Gymnasium's own Hopper-v5 / Walker2d-v5 run in
lockstep (same seed, same actions): 0 on every step but the last, which pays the episode's summed
dense reward, whether the episode ends by a fall or by the time limit; reset clears the sum; the
vector envs training builds pay the same."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("mujoco", reason="needs the mujoco extra")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from steinrl import envs  # noqa: E402
from steinrl.envs.episodic_mujoco import EPISODIC_TASKS, EpisodicReward  # noqa: E402

TASKS = list(EPISODIC_TASKS)  # short names; EPISODIC_TASKS[name][0] is the dense Gymnasium id


def _actions(env_id: str, n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    dim = {"Hopper-v5": 3, "Walker2d-v5": 6}[env_id]  # the tasks' action sizes
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(0.0, scale, (n, dim)), -1, 1).astype(np.float32)


def _lockstep(episodic: gym.Env, dense: gym.Env, actions: np.ndarray, seed: int):
    """Reset both with ``seed`` and step both with ``actions`` until the episode ends; the list of
    (episodic step, dense step). Observations, termination and truncation must agree."""
    obs_e, _ = episodic.reset(seed=seed)
    obs_d, _ = dense.reset(seed=seed)
    np.testing.assert_array_equal(obs_e, obs_d)
    steps = []
    for action in actions:
        e, d = episodic.step(action), dense.step(action)
        np.testing.assert_array_equal(e[0], d[0])
        assert (e[2], e[3]) == (d[2], d[3]) and e[4]["x_position"] == d[4]["x_position"]
        steps.append((e, d))
        if d[2] or d[3]:
            break
    return steps


def _check_paid_at_the_end(steps) -> None:
    """0 before the last step; the last pays the dense rewards' sum; info carries each dense reward."""
    *before, (last_e, _) = steps
    assert all(e[1] == 0.0 for e, _ in before)
    assert all(e[4]["dense_reward"] == d[1] for e, d in steps)
    assert last_e[1] == pytest.approx(sum(float(d[1]) for _, d in steps), rel=1e-12, abs=1e-12)
    assert last_e[1] != 0.0


@pytest.mark.parametrize("name", TASKS)
def test_check_env_passes(name):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        warnings.filterwarnings("ignore", message=".*Box observation space (minimum|maximum) value is.*")
        made = envs.make(name)
        check_env(made, skip_render_check=True)
        check_env(gym.make(envs.resolve_env_id(name)).unwrapped, skip_render_check=True)
        made.close()


@pytest.mark.parametrize("name", TASKS)
def test_registered_with_short_name_time_limit_threshold_and_config(name):
    from steinrl.run.config import env_config_path, load_config

    env_id = f"steinrl/{name}-v0"
    dense_id = EPISODIC_TASKS[name][0]
    assert envs.resolve_env_id(name) == env_id == envs.MUJOCO_NAMES[name] and envs.short_name(env_id) == name
    assert not envs.is_steinrl_env(env_id)
    spec = gym.spec(env_id)
    assert spec.max_episode_steps == gym.spec(dense_id).max_episode_steps == 1000 and spec.reward_threshold == 2000.0
    made = envs.make(name)
    # the payment outside Gymnasium's TimeLimit, over the dense task's own env class
    assert isinstance(made, EpisodicReward) and isinstance(made.env, gym.wrappers.TimeLimit)
    assert type(made.unwrapped) is type(gym.make(dense_id).unwrapped)
    assert made.spec.max_episode_steps == 1000
    made.close()
    assert env_config_path(name).name == f"{name}.yaml" == env_config_path(env_id).name
    cfg = load_config("independent-ppo", name)
    assert cfg.rollout.horizon == 1000 and cfg.rollout.batch_size == 2048 and cfg.particles == 4


@pytest.mark.parametrize("name", TASKS)
def test_a_fall_pays_the_episodes_dense_return_on_its_last_step(name):
    """Random actions (σ = 1) from the reset: the dense env falls (terminated) within 200 steps;
    the episodic env pays 0 until then and the summed dense reward on that step."""
    dense_id = EPISODIC_TASKS[name][0]
    episodic, dense = envs.make(name), gym.make(dense_id)
    for seed in (0, 1):
        steps = _lockstep(episodic, dense, _actions(dense_id, 200, seed), seed)
        assert steps[-1][1][2] is True and steps[-1][1][3] is False and len(steps) > 1
        _check_paid_at_the_end(steps)


@pytest.mark.parametrize("name", TASKS)
def test_the_time_limit_pays_the_registered_one_and_a_shorter_one(name):
    """Without the health check (``terminate_when_unhealthy=False``, Gymnasium's own option) the
    episode ends at the registered 1000 steps, truncated, and pays there; with
    ``max_episode_steps=25`` it ends and pays at step 25."""
    dense_id = EPISODIC_TASKS[name][0]
    for limit in (None, 25):
        kwargs = {"terminate_when_unhealthy": False, **({} if limit is None else {"max_episode_steps": limit})}
        episodic, dense = envs.make(name, **kwargs), gym.make(dense_id, **kwargs)
        steps = _lockstep(episodic, dense, _actions(dense_id, 1001, 2, scale=0.3), 2)
        assert len(steps) == (limit or 1000) and steps[-1][0][3] is True and steps[-1][0][2] is False
        _check_paid_at_the_end(steps)


@pytest.mark.parametrize("name", TASKS)
def test_reset_clears_the_sum(name):
    """Ten steps, then a reset mid-episode: the next episode's payment is its own dense sum only."""
    dense_id = EPISODIC_TASKS[name][0]
    episodic, dense = envs.make(name, max_episode_steps=30), gym.make(dense_id, max_episode_steps=30)
    actions = _actions(dense_id, 40, 3, scale=0.3)
    episodic.reset(seed=5)
    for action in actions[:10]:
        assert episodic.step(action)[1] == 0.0
    _check_paid_at_the_end(_lockstep(episodic, dense, actions, 6))


@pytest.mark.parametrize("name", TASKS)
def test_the_vector_env_training_builds_pays_each_episode_at_its_end(name):
    """steinrl.envs.make_vec (Gymnasium's sync vector env, next-step autoreset) against Gymnasium's
    dense vector env, 3 envs, 30-step limit, 100 steps of the same actions: several episodes per
    env; each env's episodic reward is 0 but on a step that ends an episode, where it is the dense
    rewards' sum since that env's last reset."""
    dense_id = EPISODIC_TASKS[name][0]
    vec = envs.make_vec(name, 3, max_episode_steps=30)
    ref = gym.make_vec(dense_id, 3, vectorization_mode="sync", max_episode_steps=30)
    assert isinstance(vec, gym.vector.SyncVectorEnv)
    obs, _ = vec.reset(seed=7)
    np.testing.assert_array_equal(obs, ref.reset(seed=7)[0])
    actions = _actions(dense_id, 300, 8, scale=0.5).reshape(100, 3, -1)
    running, paid = np.zeros(3), 0
    for action in actions:
        o, r, term, trunc, _ = vec.step(action)
        o_d, r_d, term_d, trunc_d, _ = ref.step(action)
        np.testing.assert_array_equal(o, o_d)
        np.testing.assert_array_equal(term, term_d)
        np.testing.assert_array_equal(trunc, trunc_d)
        running += r_d  # the autoreset step pays 0 in both
        done = term | trunc
        np.testing.assert_allclose(r[done], running[done], rtol=1e-12, atol=1e-12)
        assert np.all(r[~done] == 0.0)
        paid += int(done.sum())
        running[done] = 0.0
    assert paid >= 9  # every env ended at least three episodes
    vec.close()
    ref.close()


def test_independent_ppo_trains_on_it(tmp_path):
    """Two tiny iterations through the CLI's run loop (the task's config, Gymnasium's vector env)."""
    from conftest import trained_run

    run = trained_run(tmp_path, "independent-ppo", "EpisodicHopper", horizon=20, batch_size=40, epochs=2, minibatches=2)
    assert (run / "checkpoint.pt").is_file()


def test_compare_scores_the_whole_return_the_dense_task_would_pay(tmp_path):
    """``steinrl compare`` on an episodic run evaluates the episodic task, and its return is what the
    dense Hopper-v5 pays over the same episodes (a plain Gymnasium loop here: the first reset seeded,
    the same particle's deterministic action, the run's 20-step cap)."""
    from conftest import trained_run

    from steinrl.run.compare import compare_runs
    from steinrl.run.compare_eval import EnsemblePredictor, make_env_of
    from steinrl.run.load import load_run

    run = trained_run(tmp_path, "independent-ppo", "EpisodicHopper", horizon=20, batch_size=40, epochs=2, minibatches=2)
    row = next(r for r in compare_runs([run], episodes=2, seed=7) if r["policy"] == "best-train")
    cfg, policy, _ = load_run(run)
    scored, layers = make_env_of(cfg)(), []
    while hasattr(scored, "env"):
        layers, scored = layers + [type(scored)], scored.env
    assert EpisodicReward in layers  # compare scores the episodic task, not the dense one
    env = gym.make(EPISODIC_TASKS["EpisodicHopper"][0], max_episode_steps=20)
    actor = EnsemblePredictor(policy, env.action_space, act_mode="particle", particle=int(row["particle"]), seed=7)
    returns, lengths = [], []
    obs, _ = env.reset(seed=7)
    for _ in range(2):
        total, steps, done = 0.0, 0, False
        while not done:
            action, _ = actor.predict(obs[None], deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action[0])
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        returns.append(total)
        lengths.append(steps)
        obs, _ = env.reset()
    # SB3's Monitor, which compare's evaluate_policy reads, rounds each episode's return to 6 decimals
    assert row["eval_mean"] == pytest.approx(np.mean(returns), rel=0, abs=1e-6)
    assert row["ep_len_mean"] == pytest.approx(np.mean(lengths))
    env.close()
