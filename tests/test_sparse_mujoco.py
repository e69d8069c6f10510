"""SparseHalfCheetah (envs/sparse_mujoco.py): Gymnasium's env checker, the registration, and the
reward rule checked by hand against HalfCheetah-v5 run in lockstep (same seed, same actions)."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("mujoco", reason="needs the mujoco extra")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from steinrl import envs  # noqa: E402
from steinrl.envs.sparse_mujoco import CTRL_COST_WEIGHT, GOAL_DISTANCE, SparseHalfCheetahEnv  # noqa: E402

ENV_ID = "steinrl/SparseHalfCheetah-v1"


def test_check_env_passes():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box observation space (minimum|maximum) value is.*")
        check_env(SparseHalfCheetahEnv(), skip_render_check=True)
        made = envs.make("SparseHalfCheetah")
        check_env(made.unwrapped, skip_render_check=True)
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(made, skip_render_check=True)
        made.close()


def test_registered_with_its_short_name_time_limit_and_config():
    from steinrl.run.config import env_config_path, load_config

    assert envs.resolve_env_id("SparseHalfCheetah") == ENV_ID and envs.MUJOCO_NAMES["SparseHalfCheetah"] == ENV_ID
    assert envs.short_name(ENV_ID) == "SparseHalfCheetah" and not envs.is_steinrl_env(ENV_ID)
    assert gym.spec(ENV_ID).max_episode_steps == 1000
    assert env_config_path(ENV_ID).name == "SparseHalfCheetah.yaml" == env_config_path("SparseHalfCheetah").name
    cfg = load_config("svgd-ppo", "SparseHalfCheetah")
    assert cfg.rollout.horizon == 1000 and cfg.policy.log_std_init == 0.0 and cfg.rollout.batch_size == 2048
    # M = 4 (the exploration study's), and the one shipped Stein setting: the weight-space kernel at lambda = 1
    assert (cfg.particles, cfg.update.kernel["space"], cfg.update.repulsion) == (4, "weights",
                                                                                {"name": "constant", "weight": 1.0})
    vec = envs.make_vec("SparseHalfCheetah", 2)  # Gymnasium's sync vector env: no numpy entry point
    assert isinstance(vec, gym.vector.SyncVectorEnv) and vec.observation_space.shape == (2, 18)
    vec.close()


def _lockstep(sparse, dense, steps, seed, rng, scale=1.0):
    """Step both envs with the same actions; yield (action, sparse step, dense step)."""
    obs_s, info_s = sparse.reset(seed=seed)
    obs_d, info_d = dense.reset(seed=seed)
    np.testing.assert_array_equal(obs_s, obs_d)
    assert info_s["x_position"] == info_d["x_position"]
    for _ in range(steps):
        action = np.clip(rng.normal(0.0, scale, 6), -1, 1).astype(np.float32)
        yield action, sparse.step(action), dense.step(action)


def test_same_dynamics_as_halfcheetah_and_the_reward_is_one_past_the_goal():
    """Against HalfCheetah-v5 with the torso's x observed: equal observations and x, and reward
    1 exactly on the steps whose x (HalfCheetah's own info) exceeds 5 m, else 0, minus
    HalfCheetah's control cost 0.1 |a|² (the registered task); with ctrl_cost_weight 0 (the
    task's version 0) the goal reward alone."""
    rng = np.random.default_rng(0)

    def dense():
        return gym.make("HalfCheetah-v5", exclude_current_positions_from_observation=False)

    paid = []
    for weight, (sp, de) in ((0.1, (envs.make("SparseHalfCheetah"), dense())),
                             (0.0, (SparseHalfCheetahEnv(ctrl_cost_weight=0.0), dense().unwrapped))):
        for k, (action, s, d) in enumerate(_lockstep(sp, de, 60, seed=3, rng=rng)):
            if k == 0:  # move both to the same state beyond the reset: x 4.7, forward 3 m/s
                for env in (sp, de):
                    qpos, qvel = env.unwrapped.data.qpos.copy(), env.unwrapped.data.qvel.copy()
                    qpos[0], qvel[0] = 4.7, 3.0
                    env.unwrapped.set_state(qpos, qvel)
                continue
            np.testing.assert_array_equal(s[0], d[0])
            x = d[4]["x_position"]
            assert s[4]["x_position"] == x and s[0][0] == x  # the torso's x is the first observation
            # HalfCheetah's reward_ctrl is -0.1 |a|² (its default weight), computed as it computes it
            expected = (1.0 if x > 5.0 else 0.0) + (weight / 0.1) * d[4]["reward_ctrl"]
            assert s[1] == pytest.approx(expected, abs=1e-12)
            assert abs(d[4]["reward_ctrl"] + 0.1 * float(np.sum(np.square(action.astype(float))))) < 1e-6
            assert s[4]["reward_goal"] == (x > 5.0) and s[2] is False and s[3] is False
            if weight == 0.0:
                paid.append(s[1])
    assert 0 < sum(paid) < len(paid)  # both sides of the goal were visited


def test_a_random_policy_from_the_reset_only_pays_for_its_actions_early():
    """From the reset (x within 0.1 m of 0) no 40-step random walk reaches 5 m: the return is
    the actions' cost alone, -0.1 Σ|a|² (by hand), and standing still (a = 0) returns 0."""
    env = envs.make("SparseHalfCheetah")
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    assert abs(info["x_position"]) <= 0.1 and GOAL_DISTANCE == 5.0 and CTRL_COST_WEIGHT == 0.1
    actions = rng.uniform(-1, 1, (40, 6)).astype(np.float32)
    steps = [env.step(a) for a in actions]
    assert all(s[4]["reward_goal"] == 0.0 for s in steps)
    assert sum(s[1] for s in steps) == pytest.approx(-0.1 * float(np.sum(actions.astype(float) ** 2)), rel=1e-6)
    env.reset(seed=0)
    assert sum(env.step(np.zeros(6, np.float32))[1] for _ in range(40)) == 0.0
    env.close()


@pytest.mark.parametrize("kwargs", [{"goal_distance": 0.0}, {"goal_distance": float("nan")},
                                    {"ctrl_cost_weight": -1.0}])
def test_bad_constants_are_refused(kwargs):
    with pytest.raises(ValueError, match="must be a finite number"):
        SparseHalfCheetahEnv(**kwargs)


def test_svgd_ppo_trains_on_it_with_the_function_space_kernel(tmp_path):
    """Two tiny iterations through the CLI's run loop (the task's config, Gymnasium's vector env)."""
    from conftest import trained_run

    run = trained_run(tmp_path, "svgd-ppo", "SparseHalfCheetah", horizon=20, batch_size=40,
                      **{"update.kernel": {"space": "functions", "states": 8}})
    assert (run / "checkpoint.pt").is_file()


@pytest.mark.parametrize("args", [["--goal", "0"], ["--ctrl-cost", "-1"], ["--steps", "0"]])
def test_the_variants_benchmark_refuses_bad_constants_in_one_line(args):
    """research/scripts/sparse_halfcheetah_variants.py: a bad constant is one `error:` line, exit 2, no training."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "research" / "scripts" / "sparse_halfcheetah_variants.py"
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: " + args[0])
