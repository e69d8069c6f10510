"""A resumed MuJoCo run continues exactly: episodes in progress (physics, time limit, reset
generator, pending autoresets), observation and reward statistics, optimizers."""

import pytest

import steinrl

pytest.importorskip("mujoco")

SMALL = {"particles": 2, "rollout.envs_per_particle": 2, "rollout.batch_size": 48, "rollout.sampling": "continuing",
         "rollout.vectorization": "sync", "estimator.minibatches": 4, "estimator.epochs": 2}


def strip(row):
    return {k: str(v) for k, v in row.items() if not k.startswith("time/") or k == "time/total_env_steps"}  # NaN == NaN


@pytest.mark.parametrize("env", ["Hopper-v5", "MountainCarContinuous-v0"])
def test_a_resumed_run_continues_exactly(tmp_path, env):
    cfg = steinrl.load_config("svgd-ppo", env, SMALL, preset="mujoco-ppo")
    straight = steinrl.Trainer(cfg)
    expected = [strip(straight.step()) for _ in range(4)]
    first = steinrl.Trainer(cfg)
    for _ in range(2):
        first.step()
    first.save(tmp_path / "c.pt")
    again = steinrl.Trainer(cfg).restore(tmp_path / "c.pt")
    assert [strip(again.step()) for _ in range(2)] == expected[2:]
    obs_norm = again.job.agent.policy.obs_norm
    assert obs_norm.enabled and float(obs_norm.count) > 100  # the statistics came back with the checkpoint
