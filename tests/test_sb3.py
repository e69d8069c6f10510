"""Stable-Baselines3 interop: EnsembleSB3Policy, the SVPG algorithm class, structured A2C / PPO.

Matching ``evaluate_policy`` against ``steinrl.rl.evaluation.run_episodes``: run_episodes
with ``episodes=1`` steps a vector env of one env reset with ``seed``; a vector env of one
env and a single env give the same trajectory for the same seed and actions
(tests/test_envs_consistency.py). So for each seed we evaluate one episode on a
``DummyVecEnv`` of one env seeded with the same seed (SB3's ``VecEnv.seed`` applies at the
next reset) and re-seed the policy's actor with it: the particle draw (``sample``) and the
action noise (stochastic modes) then come from the same generator in the same order, and
returns agree to float rounding in every acting mode.
"""

from __future__ import annotations

import math
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import trained_run
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback, EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.vec_env import DummyVecEnv

import steinrl.envs as envs
from steinrl.core.layers import HouseholderLinear, KroneckerLinear
from steinrl.rl.evaluation import run_episodes
from steinrl.run.load import load_run
from steinrl.sb3 import SVPG, EnsembleSB3Policy, StructuredActorCriticPolicy

TINY = dict(particles=3, envs_per_particle=2, batch_size=40, horizon=40)
SEEDS = range(4)


@pytest.fixture(scope="module")
def box_run(tmp_path_factory):
    return trained_run(tmp_path_factory.mktemp("box"))


@pytest.fixture(scope="module")
def discrete_run(tmp_path_factory):
    return trained_run(tmp_path_factory.mktemp("discrete"), env="CartPole-v1", algo="svgd-reinforce")


def sb3_returns(policy, cfg, seeds, deterministic):
    out = []
    for seed in seeds:
        venv = DummyVecEnv([lambda: envs.make(cfg.env, max_episode_steps=cfg.rollout.horizon)])
        venv.seed(seed)
        policy.set_act_mode(seed=seed)
        returns, _ = evaluate_policy(policy, venv, n_eval_episodes=1, deterministic=deterministic,
                                     return_episode_rewards=True, warn=False)
        venv.close()
        out += returns
    return out


def steinrl_returns(cfg, ensemble, mode, seeds, deterministic):
    return [r for seed in seeds
            for r in run_episodes(cfg, ensemble, 1, mode=mode, deterministic=deterministic, seed=seed)["returns"]]


# --- EnsembleSB3Policy --------------------------------------------------------------
@pytest.mark.parametrize("run", ["box_run", "discrete_run"])
@pytest.mark.parametrize("mode", ["mean", "particle", "sample"])
@pytest.mark.parametrize("deterministic", [True, False])
def test_evaluate_policy_matches_run_episodes(request, run, mode, deterministic):
    run_dir = request.getfixturevalue(run)
    cfg, ensemble, _ = load_run(run_dir)
    policy = EnsembleSB3Policy.from_run(run_dir, act_mode=mode, particle=0)
    ours = sb3_returns(policy, cfg, SEEDS, deterministic)
    ref = steinrl_returns(cfg, ensemble, mode, SEEDS, deterministic)
    np.testing.assert_allclose(ours, ref, rtol=1e-5)
    assert len(set(np.round(ref, 3))) > 1  # the seeds give different episodes


def _reference_returns(ensemble, env_id, particle, seeds):
    """Episodes of one particle acting greedily, through plain ``nn.Linear`` modules and a
    hand-written loop on the single Gymnasium env (independent of steinrl's action path)."""
    net = ensemble.net.particle_module(particle)
    out = []
    for seed in seeds:
        env = gym.make(env_id, max_episode_steps=40)
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                y = net(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            if isinstance(env.action_space, gym.spaces.Discrete):
                action = int(np.argmax(y))
            else:
                action = np.clip(y, env.action_space.low, env.action_space.high)
            obs, r, term, trunc, _ = env.step(action)
            total += float(r)
            done = term or trunc
        out.append(total)
        env.close()
    return out


@pytest.mark.parametrize("run", ["box_run", "discrete_run"])
def test_evaluate_policy_returns_equal_a_hand_written_episode_loop(request, run):
    run_dir = request.getfixturevalue(run)
    cfg, ensemble, _ = load_run(run_dir)
    env_id = envs.resolve_env_id(cfg.env)
    policy = EnsembleSB3Policy.from_run(run_dir, act_mode="particle", particle=1)
    ours = []
    for seed in SEEDS:
        venv = DummyVecEnv([lambda: gym.make(env_id, max_episode_steps=40)])
        venv.seed(seed)
        returns, _ = evaluate_policy(policy, venv, n_eval_episodes=1, deterministic=True, return_episode_rewards=True,
                                     warn=False)
        ours += returns
    ref = _reference_returns(ensemble, env_id, 1, SEEDS)
    np.testing.assert_allclose(ours, ref, rtol=1e-5)
    assert len(set(np.round(ref, 3))) > 1  # the seeds give different episodes


def test_sample_mode_redraws_particle_at_episode_start(box_run):
    policy = EnsembleSB3Policy.from_run(box_run, act_mode="sample", seed=3)
    obs = np.zeros((2, 4), dtype=np.float32)
    policy.predict(obs, episode_start=np.array([True, True]), deterministic=True)
    first = policy._actor.assigned.clone()
    for _ in range(5):
        policy.predict(obs, episode_start=np.array([False, False]))
        assert torch.equal(policy._actor.assigned, first)
    seen = set()
    for _ in range(20):
        policy.predict(obs, episode_start=np.array([True, False]))
        assert policy._actor.assigned[1] == first[1]
        seen.add(int(policy._actor.assigned[0]))
    assert len(seen) > 1
    # the action of each env is that of its particle
    actions, _ = policy.predict(obs, episode_start=np.array([False, False]), deterministic=True)
    for env, particle in enumerate(policy._actor.assigned.tolist()):
        policy_i = EnsembleSB3Policy.from_run(box_run, act_mode="particle", particle=particle)
        np.testing.assert_allclose(actions[env], policy_i.predict(obs[env], deterministic=True)[0], rtol=1e-6)


def test_box_actions_are_clipped_and_discrete_are_ints(box_run, discrete_run):
    policy = EnsembleSB3Policy.from_run(box_run, act_mode="mean")
    with torch.no_grad():
        policy.ensemble.net.layers[-1].bias.fill_(100.0)
    action, _ = policy.predict(np.zeros(4, dtype=np.float32), deterministic=True)
    assert action.shape == (1,) and action[0] == 1.0
    policy = EnsembleSB3Policy.from_run(discrete_run, act_mode="sample", seed=0)
    actions, _ = policy.predict(np.zeros((3, 4), dtype=np.float32))
    assert actions.shape == (3,) and actions.dtype.kind == "i"


def test_policy_save_load(box_run, tmp_path):
    policy = EnsembleSB3Policy.from_run(box_run, act_mode="particle", particle=2, seed=5)
    policy.save(tmp_path / "policy.pt")
    loaded = EnsembleSB3Policy.load(tmp_path / "policy.pt")
    assert (loaded.act_mode, loaded.particle, loaded.seed) == ("particle", 2, 5)
    obs = np.random.default_rng(0).normal(0, 0.1, (6, 4)).astype(np.float32)
    for deterministic in (True, False):
        policy.set_act_mode(seed=1)
        loaded.set_act_mode(seed=1)
        np.testing.assert_array_equal(policy.predict(obs, deterministic=deterministic)[0],
                                      loaded.predict(obs, deterministic=deterministic)[0])


# --- SVPG ---------------------------------------------------------------------------
def svpg(tmp_path=None, env="Cartpole", **kw):
    critic = {} if kw.get("algo", "s2vgd-a2c").endswith("reinforce") else {"critic.steps": 2}
    return SVPG("MlpPolicy", env, seed=0, tensorboard_log=None if tmp_path is None else str(tmp_path),
                **{**TINY, **critic, **kw})


class Recorder(BaseCallback):
    def __init__(self, stop_at_call: int | None = None):
        super().__init__()
        self.events: list = []
        self.stop_at_call = stop_at_call

    def _on_training_start(self):
        self.events.append(("training_start", self.num_timesteps))

    def _on_rollout_start(self):
        self.events.append(("rollout_start", self.num_timesteps))

    def _on_step(self):
        self.events.append(("step", self.num_timesteps))
        assert set(self.locals) >= {"rewards", "dones", "infos"}
        return self.stop_at_call is None or self.n_calls < self.stop_at_call

    def _on_rollout_end(self):
        self.events.append(("rollout_end", self.num_timesteps))

    def _on_training_end(self):
        self.events.append(("training_end", self.num_timesteps))


class Capture(KVWriter):
    def __init__(self):
        self.rows = []

    def write(self, key_values, key_excluded, step=0):
        self.rows.append((step, dict(key_values)))


def test_svpg_learn_calls_callbacks_and_logs(tmp_path):
    model = svpg()
    capture = Capture()
    model.set_logger(Logger(folder=None, output_formats=[capture]))
    recorder = Recorder()
    eval_env = make_vec_env("steinrl/Cartpole-v0", n_envs=1, seed=1, env_kwargs={"max_episode_steps": 40})
    evaluator = EvalCallback(eval_env, eval_freq=10, n_eval_episodes=2, best_model_save_path=str(tmp_path / "best"),
                             log_path=str(tmp_path / "eval"))
    checkpoints = CheckpointCallback(save_freq=25, save_path=str(tmp_path / "ckpt"), name_prefix="svpg")
    model.learn(300, callback=[recorder, evaluator, checkpoints])

    kinds = [e[0] for e in recorder.events]
    assert kinds[0] == "training_start" and kinds[-1] == "training_end"
    assert kinds.count("rollout_start") == kinds.count("rollout_end") == model.iteration >= 2
    steps = [n for kind, n in recorder.events if kind == "step"]
    assert steps == sorted(steps) and steps[-1] == model.num_timesteps >= 300
    # num_timesteps counts the valid env steps of every particle
    rows = [row for _, row in capture.rows if "train/surrogate" in row]
    assert model.num_timesteps == round(sum(r["time/steps_per_particle"] * 3 for r in rows))
    assert model.iteration <= math.ceil(300 / (3 * 40))
    # EvalCallback evaluated the model and saved the best one; CheckpointCallback saved
    assert len(evaluator.evaluations_timesteps) >= 2 and (tmp_path / "eval" / "evaluations.npz").is_file()
    assert (tmp_path / "best" / "best_model.zip").is_file()
    saved = sorted((tmp_path / "ckpt").glob("svpg_*_steps.zip"))
    assert saved and SVPG.load(saved[-1]).num_timesteps > 0
    # SB3 logger keys, one dump per iteration at num_timesteps (EvalCallback dumps its own rows)
    train_rows = [(step, row) for step, row in capture.rows if "train/surrogate" in row]
    assert len(train_rows) == model.iteration
    step, last = train_rows[-1]
    assert step == model.num_timesteps
    for key in ("rollout/ep_rew_mean", "rollout/ep_len_mean", "time/fps", "time/total_timesteps",
                "train/surrogate", "train/value_loss", "train/learning_rate"):
        assert key in last, key
    assert np.isfinite(last["rollout/ep_rew_mean"]) and "rollout/ep_rew_max_particle" in last


def test_svpg_callback_false_stops_training():
    model = svpg()
    recorder = Recorder(stop_at_call=3)
    before = [p.detach().clone() for p in model.agent.policy.particle_parameters()]
    model.learn(100_000, callback=recorder)
    # as in SB3's on-policy algorithms: on_step returning False skips that rollout's update
    assert model.iteration == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.agent.policy.particle_parameters()))
    assert [e[0] for e in recorder.events].count("step") == 3
    assert recorder.events[-1][0] == "training_end"


@pytest.mark.parametrize("sampling", ["whole_episodes", "continuing"])
def test_svpg_total_timesteps_rule(sampling):
    model = svpg(sampling=sampling)
    model.learn(250)
    assert model.num_timesteps >= 250
    if sampling == "whole_episodes":  # each iteration has >= particles * batch_size = 120 valid steps
        assert model.iteration <= math.ceil(250 / 120)
    model.learn(100, reset_num_timesteps=False)  # 100 more
    assert model.num_timesteps >= 350


def test_svpg_runs_the_train_py_loop(tmp_path):
    """Same config and seed: SVPG.learn gives the parameters of train.py's run."""
    run_dir = trained_run(tmp_path)
    _, ref, _ = load_run(run_dir)
    model = svpg()
    model.learn(1, reset_num_timesteps=True)  # one iteration ...
    model.learn(1, reset_num_timesteps=True)  # ... and a second one (continues the run)
    assert model.iteration == 2
    for a, b in zip(model.policy.ensemble.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_svpg_save_load_roundtrip(tmp_path):
    model = svpg(policy_kwargs=dict(act_mode="mean"))
    model.learn(200)
    model.save(tmp_path / "model")
    path = tmp_path / "model.zip"
    assert zipfile.is_zipfile(path)
    state = torch.load(path, weights_only=True)  # plain data only
    assert state["config"]["particles"] == 3 and state["trainer"]["iteration"] == model.iteration
    loaded = SVPG.load(tmp_path / "model")
    assert (loaded.iteration, loaded.num_timesteps) == (model.iteration, model.num_timesteps)
    assert loaded.policy.act_mode == "mean"
    obs = np.random.default_rng(0).normal(0, 0.2, (8, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  loaded.predict(obs, deterministic=True)[0])
    for m in (model, loaded):
        m.policy.set_act_mode("sample", seed=7)
    np.testing.assert_array_equal(model.predict(obs, episode_start=np.ones(8, bool))[0],
                                  loaded.predict(obs, episode_start=np.ones(8, bool))[0])
    # training continues identically (optimizer and critic state saved too)
    model.learn(100, reset_num_timesteps=False)
    loaded.learn(100, reset_num_timesteps=False)
    assert loaded.num_timesteps == model.num_timesteps
    for a, b in zip(model.agent.state_dict()["policy"].values(), loaded.agent.state_dict()["policy"].values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_svpg_env_inputs(tmp_path):
    gym_env = gym.make("steinrl/Cartpole-v0")
    assert svpg(env=gym_env).cfg.env == "Cartpole"
    sb3_venv = make_vec_env("CartPole-v1", n_envs=2)
    model = svpg(env=sb3_venv, algo="svgd-reinforce")
    assert model.cfg.env == "CartPole-v1" and model.get_env() is sb3_venv
    model.learn(100)  # Discrete actions
    actions, _ = model.predict(sb3_venv.reset())
    assert actions.shape == (2,) and set(actions.tolist()) <= {0, 1}
    model = svpg(env=gym.make_vec("CartPole-v1", 2), algo="svgd-reinforce")
    assert model.cfg.env == "CartPole-v1" and model.get_env().num_envs == 1
    with pytest.raises(ValueError, match="no spec"):
        svpg(env=envs.CartpoleEnv())
    # tensorboard_log: SB3's logger writes there; SVPG itself writes no files
    model = svpg(tmp_path, env="Cartpole")
    model.learn(50, tb_log_name="tb")
    assert list(tmp_path.glob("tb_1/events.out.tfevents.*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tb_1"]


# --- StructuredActorCriticPolicy ------------------------------------------------------
@pytest.mark.parametrize("algo, prior, layer", [(A2C, "householder", HouseholderLinear),
                                                (PPO, "kronecker", KroneckerLinear)])
def test_structured_policy_trains_and_round_trips(tmp_path, algo, prior, layer):
    kwargs = dict(n_steps=32, batch_size=32, n_epochs=2) if algo is PPO else {}
    model = algo(StructuredActorCriticPolicy, "CartPole-v1", policy_kwargs=dict(prior=prior, K=1), seed=0,
                 **kwargs)
    extractor = model.policy.mlp_extractor
    assert not any(isinstance(m, torch.nn.Linear) for m in extractor.modules())
    assert sum(isinstance(m, layer) for m in extractor.modules()) == 4  # 2 policy + 2 value layers
    before = [p.detach().clone() for p in extractor.parameters()]
    model.learn(300)
    assert any(not torch.equal(a, b) for a, b in zip(before, extractor.parameters()))
    model.save(tmp_path / "model")
    loaded = algo.load(tmp_path / "model")
    assert loaded.policy.prior == prior
    obs = np.random.default_rng(0).normal(0, 0.5, (16, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  loaded.predict(obs, deterministic=True)[0])
    torch.testing.assert_close(model.policy.predict_values(torch.as_tensor(obs)),
                               loaded.policy.predict_values(torch.as_tensor(obs)))


@pytest.mark.parametrize("prior", ["householder", "kronecker", "gaussian"])
def test_single_particle_layer_matches_the_ensemble_layer(prior):
    from steinrl.sb3.structured import StructuredLinear1, layer_options

    torch.manual_seed(0)
    lin = StructuredLinear1(prior, 5, 3, **layer_options(prior, K=2, factor_std=0.3))
    x = torch.randn(2, 7, 5)
    torch.testing.assert_close(lin(x), lin.layer(x.reshape(1, 14, 5)).reshape(2, 7, 3))


def test_structured_policy_map_prior_pulls_weights_in():
    model = A2C(StructuredActorCriticPolicy, "CartPole-v1", seed=0,
                policy_kwargs=dict(prior="householder", log_prior="gaussian", prior_weight=0.1))
    policy = model.policy
    lp_before = float(policy.log_prior_value().detach())
    policy.optimizer.zero_grad()
    for p in policy.parameters():
        p.grad = torch.zeros_like(p)
    for _ in range(5):
        policy.optimizer.step()  # only the prior term moves the structured layers
    assert float(policy.log_prior_value().detach()) > lp_before
    with pytest.raises(ValueError, match="unknown prior"):
        A2C(StructuredActorCriticPolicy, "CartPole-v1", policy_kwargs=dict(prior="wishart"))
