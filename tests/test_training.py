"""End-to-end training through ``steinrl.Trainer``: every algorithm x task, determinism,
step / save / restore, no side effects, non-finite values, Gymnasium ids."""

import os

import numpy as np
import pytest
import torch
from conftest import RECORDED_COUPLING, tiny_config, trained_run

import steinrl
from steinrl.errors import NonFiniteError
from steinrl.rl.job import PolicyGradientJob
from steinrl.run.checkpoint import load_checkpoint
from steinrl.run.config import load_config
from steinrl.run.logger import read_metrics


def no_time(rows):
    """The rows without wall-clock entries; NaN (a particle with no finished episode) as a string, so rows compare."""
    return [{k: ("nan" if v != v else v) for k, v in row.items() if not k.startswith("time/")} for row in rows]


def run(cfg, n, keep_time=False):
    trainer = steinrl.Trainer(cfg)
    rows = [trainer.step() for _ in range(n)]
    return trainer, rows if keep_time else no_time(rows)


@pytest.mark.parametrize("env", ["Cartpole", "CartpoleSwingUp", "DoublePendulum"])
@pytest.mark.parametrize("algo", PolicyGradientJob.algorithm_names())
def test_every_algo_runs_on_every_task(algo, env):
    cfg = tiny_config(algo, env)
    trainer, rows = run(cfg, 2, keep_time=True)
    assert trainer.iteration == 2 and trainer.done
    for r in rows:
        assert np.isfinite(r["rollout/ep_rew_max_particle"])
        assert np.isfinite(r["train/surrogate"]) and np.isfinite(r["train/log_prior"])
        assert ("train/value_loss" in r) == ("critic" in cfg)
        assert np.isfinite(r.get("train/value_loss", 0.0))
        # whole episodes: every particle collects at least its batch
        assert r["time/steps_per_particle"] >= cfg.rollout.batch_size


def test_particles_move_and_svgd_differs_from_independent():
    params = {}
    for algo in ("svgd-reinforce", "independent-reinforce"):
        trainer = steinrl.Trainer(tiny_config(algo, "Cartpole", iterations=3))
        before = [p.detach().clone() for p in trainer.job.agent.policy.particle_parameters()]
        for _ in range(3):
            trainer.step()
        after = trainer.job.agent.policy.particle_parameters()
        assert any(not torch.equal(a, b) for a, b in zip(after, before))
        params[algo] = torch.cat([p.detach().flatten() for p in after])
    # same seed, same init: only the kernel coupling differs
    assert not torch.allclose(params["svgd-reinforce"], params["independent-reinforce"])


def _mean_return(act, episodes=3, seed=1000):
    """Mean undiscounted return of ``act(obs) -> action`` on Gymnasium's ``steinrl/Cartpole-v0``,
    stepped here one env at a time (not by the training rollout)."""
    import gymnasium as gym

    import steinrl.envs  # noqa: F401  (registers the ids)

    env = gym.make("steinrl/Cartpole-v0")
    totals = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    env.close()
    return float(np.mean(totals))


def _ensemble_return(policy):
    """Mean return of the particles' mean actions, each particle as a plain ``nn.Sequential``."""
    returns = []
    for i in range(policy.net.num_particles):
        module = policy.net.particle_module(i)

        def act(obs, module=module):
            with torch.no_grad():
                return np.clip(module(torch.as_tensor(obs, dtype=torch.float32)).numpy(), -1.0, 1.0)

        returns.append(_mean_return(act))
    return float(np.mean(returns))


@pytest.mark.parametrize("algo,extra", [
    ("svgd-reinforce", {"update.lr": 0.02}),
    ("svgd-a2c", {"update.lr": 0.02}),
    ("svgd-ppo", {}),
    ("s2vgd-ppo", {"update.lr": 0.02}),
])
def test_training_learns_to_balance_the_cartpole(algo, extra):
    """Cartpole, 4 particles, batches of 400 steps, 15 iterations, seed 0: the particles' mean
    actions, run on fresh episodes by a plain Gymnasium loop, return over 2.5 x both what the
    same particles returned before training and what uniformly random actions return (73).
    Measured: svgd-reinforce 621, svgd-a2c 522, svgd-ppo 929, s2vgd-ppo 427, against 137
    (svgd) and 114 (s2vgd) before training. With the RBF kernel on the weights at lambda = 1 (SVPG's),
    as measured (what the task files ship); the function-space setting K1 learns this small a budget
    more slowly (159, 160, 172 and 142: below the bar; on the task's own budget, 100 iterations of
    M = 16 x 5000 steps, it balances too: research/scripts/stein_setting_check.py,
    research/results/repulsion_study.md)."""
    cfg = load_config(algo, "Cartpole", {"particles": 4, "envs_per_particle": 4, "batch_size": 400, "iterations": 15,
                                         "seed": 0, "run.progress": False, "run.tensorboard": False,
                                         **RECORDED_COUPLING, **extra})
    assert not cfg.policy.normalize_obs  # the plain modules see raw observations, as the policy does
    trainer = steinrl.Trainer(cfg)
    before = _ensemble_return(trainer.job.agent.policy)
    rng = np.random.default_rng(0)
    uniform = _mean_return(lambda obs: rng.uniform(-1.0, 1.0, size=1).astype(np.float32), episodes=10)
    while not trainer.done:
        trainer.step()
    after = _ensemble_return(trainer.job.agent.policy)
    assert after > 2.5 * max(before, uniform), (after, before, uniform)


def test_same_seed_same_numbers():
    _, a = run(tiny_config(iterations=3), 3)
    _, b = run(tiny_config(iterations=3), 3)
    _, c = run(tiny_config(iterations=3, seed=1), 3)
    assert a == b
    assert a != c


@pytest.mark.parametrize("algo,extra", [
    ("s2vgd-a2c", {}),
    ("kron-reinforce", {}),
    ("svgd-ppo", {"estimator.epochs": 2}),
    ("svgd-a2c", {"critic.name": "linear", "policy.log_std_in_kernel": True, "update.proximal_weight": 0.1}),
    ("svgd-a2c", {"prior.name": "joint"}),
    ("s2vgd-a2c", {"rollout.sampling": "continuing"}),
])
def test_step_save_restore_equals_stepping_on(tmp_path, algo, extra):
    extra = dict(extra)
    cfg = tiny_config(algo, extra.pop("env", "CartpoleSwingUp"), iterations=4, **extra)
    _, straight = run(cfg, 4)
    first = steinrl.Trainer(cfg)
    head = no_time([first.step() for _ in range(2)])
    first.save(tmp_path / "ckpt.pt")
    second = steinrl.Trainer(cfg)
    second.restore(tmp_path / "ckpt.pt")
    assert second.iteration == 2
    tail = no_time([second.step() for _ in range(2)])
    assert head + tail == straight
    state = load_checkpoint(tmp_path / "ckpt.pt")
    if "critic.name" in extra:
        agent = state["job"]["agent"]
        assert "coeffs" in agent["critic"]["module"] and "prev_theta" in agent["particle_optimizer"]
        assert "own_optimizer" not in agent["particle_optimizer"]  # the log-std is in the kernel


def test_trainer_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config("svgd-a2c", "Cartpole", {"particles": 2, "batch_size": 32, "horizon": 30,
                                                 "envs_per_particle": 2, "run.logdir": str(tmp_path / "runs")})
    trainer = steinrl.Trainer(cfg)
    metrics = trainer.step()
    assert all(isinstance(v, float) for v in metrics.values()) and "rollout/ep_rew_mean" in metrics
    assert os.listdir(tmp_path) == []


def test_restore_refuses_a_checkpoint_of_another_config(tmp_path):
    trainer = steinrl.Trainer(tiny_config())
    trainer.step()
    trainer.save(tmp_path / "c.pt")
    other = steinrl.Trainer(tiny_config(particles=4))
    with pytest.raises(steinrl.ConfigError, match="different config .*particles"):
        other.restore(tmp_path / "c.pt")


def test_nan_stops_naming_iteration_particle_quantity_and_keeps_checkpoint(tmp_path):
    cfg = tiny_config("svgd-reinforce", iterations=5, **{"run.checkpoint_every": 1, "run.logdir": str(tmp_path),
                                                          "run.run_name": "r"})
    from steinrl.run.cli import _claim_new_run, run_training

    trainer = steinrl.Trainer(cfg)
    envs, agent = trainer.job.envs, trainer.job.agent
    real_step, real_collect = envs.step, agent.collect
    current = {"iteration": 0}

    def poisoned_step(actions):
        obs, rew, term, trunc, info = real_step(actions)
        if current["iteration"] == 2:
            rew = rew.copy()
            rew[cfg.rollout.envs_per_particle * 1] = np.nan  # an env of particle 1
        return obs, rew, term, trunc, info

    def collect(sampler, iteration):
        current["iteration"] = iteration
        return real_collect(sampler, iteration)

    envs.step, agent.collect = poisoned_step, collect
    # the third iteration (index 2, metrics.jsonl's row 2): messages count iterations from 1
    with pytest.raises(NonFiniteError, match=r"iteration 3 in particle\(s\) \[1\]"):
        for _ in range(5):
            trainer.step()
    # through the CLI's run loop: exit 3, the last good checkpoint (iteration 2) is kept
    trainer = steinrl.Trainer(cfg)
    envs, agent = trainer.job.envs, trainer.job.agent
    real_step, real_collect = envs.step, agent.collect
    envs.step, agent.collect = poisoned_step, collect
    run_dir = _claim_new_run(cfg)
    assert run_training(trainer, run_dir) == 3
    state = load_checkpoint(run_dir.path / "checkpoint.pt")
    assert state["iteration"] == 2
    for p in state["job"]["agent"]["policy"].values():
        assert torch.isfinite(p).all()
    assert [r["iteration"] for r in read_metrics(run_dir.path)] == [0, 1]


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1", "InvertedDoublePendulum-v5"])
def test_any_gymnasium_id_trains(tmp_path, env):
    if env.startswith("Inverted"):
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    cfg = tiny_config("s2vgd-a2c", env, **{"policy.normalize_obs": True})
    assert cfg.rollout.horizon == 40  # the tiny override wins over configs/<env>.yaml
    trainer, rows = run(cfg, 2)
    assert all(np.isfinite(r["train/surrogate"]) for r in rows)
    assert type(trainer.job.agent.policy.head).__name__ == ("CategoricalHead" if env == "CartPole-v1"
                                                             else "GaussianHead")
    # observation statistics were collected and travel with the policy's state dict
    state = trainer.state_dict()["job"]["agent"]["policy"]
    assert float(state["obs_norm.count"]) > 1.0


def test_per_task_yaml():
    assert load_config(env="Pendulum-v1").rollout.horizon == 200
    assert load_config(env="Cartpole").iterations == 100
    assert load_config(env="Cartpole", overrides={"iterations": 7}).iterations == 7


def test_a_run_directory_records_config_command_and_version(tmp_path):
    run_dir = trained_run(tmp_path)
    text = (run_dir / "config.yaml").read_text()
    assert "steinrl_version" in text and "algo: s2vgd-a2c" in text and "run_name: r" in text
    assert [r["iteration"] for r in read_metrics(run_dir)] == [0, 1]


def test_continuing_gymnasium_envs_restart_their_episodes_on_restore_with_a_warning(tmp_path):
    """Envs a checkpoint cannot hold (here Gymnasium's async vector env: each env lives in its
    own process) restart: a restored continuing run starts fresh episodes, with a warning.
    (Gymnasium's sync vector env of classic-control or MuJoCo envs is saved and continues
    exactly: tests/test_mujoco_resume.py.)"""
    cfg = tiny_config("svgd-reinforce", "CartPole-v1", **{"rollout.sampling": "continuing",
                                                           "rollout.vectorization": "async"})
    trainer = steinrl.Trainer(cfg)
    trainer.step()
    trainer.save(tmp_path / "c.pt")
    trainer.close()
    again = steinrl.Trainer(cfg)
    with pytest.warns(UserWarning, match="start fresh episodes"):
        again.restore(tmp_path / "c.pt")
    assert again.job.sampler.carry is None and np.isfinite(again.step()["train/surrogate"])
    again.close()


def test_continuing_classic_control_envs_continue_exactly(tmp_path):
    cfg = tiny_config("svgd-reinforce", "CartPole-v1", **{"rollout.sampling": "continuing"})
    straight = steinrl.Trainer(cfg)
    expected = [straight.step()["train/surrogate"] for _ in range(3)]
    first = steinrl.Trainer(cfg)
    first.step()
    first.save(tmp_path / "c.pt")
    again = steinrl.Trainer(cfg).restore(tmp_path / "c.pt")
    assert [again.step()["train/surrogate"] for _ in range(2)] == expected[1:]
