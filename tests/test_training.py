"""End-to-end training: every algorithm x task, determinism, resume, NaN handling."""

import json

import numpy as np
import pytest
import torch

from steinrl.rl.agent import NonFiniteError
from steinrl.run.algos import ALGOS
from steinrl.run.checkpoint import load_checkpoint
from steinrl.run.config import resolve_config
from steinrl.run.logger import read_metrics
from steinrl.run.trainer import Trainer

TINY = dict(particles=3, envs_per_particle=2, batch_size=40, horizon=40, value_steps=2, progress=False,
            tensorboard=False)


def tiny(tmp_path, **kw):
    over = {**TINY, "logdir": str(tmp_path), "run_name": "run", "iterations": 2, **kw}
    return resolve_config(over.pop("env", "CartpoleSwingUp"), overrides=over)


def curve(run_dir):
    """Per-iteration metrics without wall-clock entries."""
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in read_metrics(run_dir)]


@pytest.mark.parametrize("env", ["Cartpole", "CartpoleSwingUp", "DoublePendulum"])
@pytest.mark.parametrize("algo", ALGOS)
def test_every_algo_runs_on_every_task(tmp_path, algo, env):
    cfg = tiny(tmp_path, algo=algo, env=env)
    run_dir = Trainer(cfg).train()
    rows = read_metrics(run_dir)
    assert [r["iteration"] for r in rows] == [0, 1]
    for r in rows:
        assert np.isfinite(r["rollout/ep_rew_max_particle"])
        assert r["time/steps_per_particle"] >= cfg.batch_size  # whole episodes: at least the batch
        assert np.isfinite(r["train/surrogate"]) and np.isfinite(r["train/log_prior"])
        if algo.endswith("a2c"):
            assert np.isfinite(r["train/value_loss"])
    state = load_checkpoint(run_dir)
    assert state["iteration"] == 2


def test_particles_move_and_svgd_differs_from_independent(tmp_path):
    params = {}
    for algo in ("svgd-reinforce", "independent-reinforce"):
        cfg = tiny(tmp_path / algo, algo=algo, env="Cartpole", iterations=3)
        torch.manual_seed(0)
        trainer = Trainer(cfg)
        before = [p.detach().clone() for p in trainer.agent.policy.particle_parameters()]
        trainer.train()
        after = trainer.agent.policy.particle_parameters()
        assert any(not torch.equal(a, b) for a, b in zip(after, before))
        params[algo] = torch.cat([p.detach().flatten() for p in after])
    # same seed, same init: only the kernel coupling differs
    assert not torch.allclose(params["svgd-reinforce"], params["independent-reinforce"])


def test_same_seed_same_numbers(tmp_path):
    a = Trainer(tiny(tmp_path / "a", algo="s2vgd-a2c", iterations=3)).train()
    b = Trainer(tiny(tmp_path / "b", algo="s2vgd-a2c", iterations=3)).train()
    c = Trainer(tiny(tmp_path / "c", algo="s2vgd-a2c", iterations=3, seed=1)).train()
    assert curve(a) == curve(b)
    assert curve(a) != curve(c)
    pa, pb = load_checkpoint(a)["agent"]["policy"], load_checkpoint(b)["agent"]["policy"]
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


@pytest.mark.parametrize("algo,extra", [
    ("s2vgd-a2c", {}),
    ("kron-reinforce", {}),
    ("svgd-a2c", {"critic": "linear", "log_std_in_kernel": True, "proximal_weight": 0.1}),  # non-default paths
])
def test_resume_gives_the_same_curve(tmp_path, algo, extra):
    full = Trainer(tiny(tmp_path / "full", algo=algo, iterations=4, **extra)).train()
    part_cfg = tiny(tmp_path / "part", algo=algo, iterations=2, **extra)
    part = Trainer(part_cfg).train()
    # a stale row that a crashed process wrote after the checkpoint must not survive the resume
    with open(part / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"iteration": 2, "rollout/ep_rew_mean": 1e9}) + "\n")
    resumed = Trainer(None, resume=part, iterations=4).train()
    assert resumed == part
    assert curve(full) == curve(part)
    sf, sp = load_checkpoint(full)["agent"], load_checkpoint(part)["agent"]
    for key in sf["policy"]:
        assert torch.equal(sf["policy"][key], sp["policy"][key])
    if extra:
        assert torch.equal(sf["value"]["coeffs"], sp["value"]["coeffs"])
        assert "log_std_opt" not in sf and "value_opt" not in sf and "prev_theta" in sf["svgd"]


def test_nan_stops_with_iteration_and_particle_and_keeps_checkpoint(tmp_path):
    cfg = tiny(tmp_path, algo="svgd-reinforce", iterations=5, checkpoint_every=1)
    trainer = Trainer(cfg)
    envs, agent = trainer.sampler.envs, trainer.agent
    real_step, real_collect = envs.step, agent.collect
    current = {"iteration": 0}

    def poisoned_step(actions):
        obs, rew, term, trunc, info = real_step(actions)
        if current["iteration"] == 2:
            rew = rew.copy()
            rew[cfg.envs_per_particle * 1] = np.nan  # an env of particle 1
        return obs, rew, term, trunc, info

    def collect(sampler, iteration):
        current["iteration"] = iteration
        return real_collect(sampler, iteration)

    envs.step, agent.collect = poisoned_step, collect
    with pytest.raises(NonFiniteError, match=r"iteration 2 in particle\(s\) \[1\]"):
        trainer.train()
    state = load_checkpoint(trainer.run_dir)
    assert state["iteration"] == 2  # the last good checkpoint (after iterations 0 and 1)
    for p in state["agent"]["policy"].values():
        assert torch.isfinite(p).all()


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1", "InvertedDoublePendulum-v5"])
def test_any_gymnasium_id_trains(tmp_path, env):
    if env.startswith("Inverted"):
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    cfg = tiny(tmp_path, algo="s2vgd-a2c", env=env, normalize_obs=True)
    assert cfg.horizon == 40  # the tiny override wins over configs/<env>.yaml
    trainer = Trainer(cfg)
    run_dir = trainer.train()
    rows = read_metrics(run_dir)
    assert len(rows) == 2 and all(np.isfinite(r["train/surrogate"]) for r in rows)
    assert trainer.agent.policy.discrete == (env == "CartPole-v1")
    # observation statistics were collected and travel with the policy's state dict
    state = load_checkpoint(run_dir)["agent"]["policy"]
    assert float(state["obs_norm.count"]) > 1.0


def test_per_task_yaml_sets_gymnasium_horizon():
    assert resolve_config("Pendulum-v1").horizon == 200
    assert resolve_config("Cartpole").iterations == 100
