"""SB3's PPO as a steinrl job (``sb3-ppo``, ``sb3-ppo-zoo``): the same training as SB3's own
``learn``, rl-zoo3's values, checkpoints, the run loop, and the policy it loads."""

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from conftest import ROOT

import steinrl
from steinrl.run.checkpoint import load_checkpoint
from steinrl.run.cli import run_cli, train_main
from steinrl.run.config import load_config
from steinrl.run.trainer import Trainer

pytest.importorskip("mujoco")

#: Tiny rollouts: runs of a few hundred env steps.
TINY = {"sb3.n_steps": 32, "sb3.batch_size": 32, "run.progress": False, "run.tensorboard": False}


def sb3_reference(cfg):
    """SB3's own PPO on the same task and hyperparameters, built as rl-zoo3 builds it."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    h = cfg.sb3
    venv = make_vec_env(cfg.env, n_envs=h.n_envs, seed=cfg.seed)
    if h.normalize:
        venv = VecNormalize(venv, gamma=h.gamma)
    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[h.activation]
    return PPO("MlpPolicy", venv, n_steps=h.n_steps, batch_size=h.batch_size, n_epochs=h.n_epochs,
               learning_rate=h.learning_rate, gamma=h.gamma, gae_lambda=h.gae_lambda, clip_range=h.clip_range,
               ent_coef=h.ent_coef, vf_coef=h.vf_coef, max_grad_norm=h.max_grad_norm, use_sde=h.use_sde,
               sde_sample_freq=h.sde_sample_freq, seed=cfg.seed,
               policy_kwargs=dict(net_arch=dict(pi=list(h.net_arch), vf=list(h.net_arch)), activation_fn=activation,
                                  ortho_init=h.ortho_init, log_std_init=h.log_std_init))


@pytest.mark.parametrize("algo, env, timesteps", [
    ("sb3-ppo-zoo", "Pendulum-v1", 256),            # 4 envs, gSDE resampled every 4 steps
    ("sb3-ppo-zoo", "InvertedPendulum-v5", 96),     # VecNormalize, many short episodes
    ("sb3-ppo", "Pendulum-v1", 64),                 # SB3's defaults
])
def test_job_steps_train_exactly_as_sb3_learn(algo, env, timesteps):
    """k job steps = SB3's ``learn(k * n_steps * n_envs)`` with the same seed: identical weights."""
    cfg = load_config(algo, env, {**TINY, "sb3.timesteps": timesteps, "seed": 3})
    trainer = Trainer(cfg)
    while not trainer.done:
        scalars = trainer.step()
    reference = sb3_reference(cfg)
    reference.learn(timesteps)
    ours, theirs = trainer.job.runs[0].model.policy.state_dict(), reference.policy.state_dict()
    assert trainer.job.runs[0].model.num_timesteps == reference.num_timesteps == timesteps
    assert scalars["time/total_env_steps"] == timesteps
    for key in theirs:
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0)
    if cfg.sb3.normalize:
        np.testing.assert_array_equal(trainer.job.runs[0].model.env.obs_rms.mean, reference.env.obs_rms.mean)
    trainer.close()


def test_seeds_trained_together_are_each_their_own_run():
    """Trainer(cfg, seeds=[...]) steps one SB3 PPO per seed; each trains as SB3's learn alone."""
    cfg = load_config("sb3-ppo", "Pendulum-v1", {**TINY, "sb3.timesteps": 64})
    trainer = Trainer(cfg, seeds=[5, 6])
    while not trainer.done:
        trainer.step_seeds()
    for i, seed in enumerate([5, 6]):
        reference = sb3_reference(cfg.replace({"seed": seed}))
        reference.learn(64)
        for key, value in reference.policy.state_dict().items():
            torch.testing.assert_close(trainer.job.runs[i].model.policy.state_dict()[key], value, rtol=0, atol=0)
        assert trainer.state_dict(i)["config"]["seed"] == seed
    trainer.close()


def test_episode_scalars_are_the_rollouts_own_episodes():
    """ep_rew_mean averages the episodes that ended in this rollout (Monitor's returns); the
    100-episode window is SB3's ep_info_buffer; one policy: max_particle = mean."""
    cfg = load_config("sb3-ppo", "InvertedPendulum-v5", {**TINY, "sb3.timesteps": 64})
    trainer = Trainer(cfg)
    first, second = trainer.step(), trainer.step()
    buffer = [e["r"] for e in trainer.job.runs[0].model.ep_info_buffer]
    n1, n2 = int(first["rollout/episodes"]), int(second["rollout/episodes"])
    assert n1 >= 1 and n2 >= 1 and len(buffer) == n1 + n2  # InvertedPendulum's first episodes are short
    assert second["rollout/ep_rew_mean"] == pytest.approx(np.mean(buffer[n1:]))
    assert second["rollout/ep_rew_mean_100"] == pytest.approx(np.mean(buffer))
    assert second["rollout/ep_rew_max_particle"] == second["rollout/ep_rew_mean"]
    trainer.close()


def test_zoo_entry_values_and_sb3_defaults():
    """sb3-ppo-zoo takes rl-zoo3's Hopper-v4 entry (values typed from hyperparams/ppo.yml);
    sb3-ppo takes what SB3's PPO() itself sets."""
    zoo = load_config("sb3-ppo-zoo", "Hopper-v5").sb3
    assert (zoo.normalize, zoo.n_envs, zoo.timesteps, zoo.batch_size, zoo.n_steps, zoo.gamma) == \
        (True, 1, 1_000_000, 32, 512, 0.999)
    assert (zoo.learning_rate, zoo.ent_coef, zoo.clip_range, zoo.n_epochs, zoo.gae_lambda) == \
        (9.80828e-05, 0.00229519, 0.2, 5, 0.99)
    assert (zoo.max_grad_norm, zoo.vf_coef, zoo.log_std_init, zoo.ortho_init, zoo.activation, zoo.net_arch) == \
        (0.7, 0.835671, -2.0, False, "relu", [256, 256])
    from stable_baselines3 import PPO

    cfg = load_config("sb3-ppo", "Pendulum-v1")
    model = PPO("MlpPolicy", "Pendulum-v1", device="cpu")
    h = cfg.sb3
    assert (h.n_steps, h.batch_size, h.n_epochs, h.gamma, h.gae_lambda, h.ent_coef, h.vf_coef, h.max_grad_norm) == \
        (model.n_steps, model.batch_size, model.n_epochs, model.gamma, model.gae_lambda, model.ent_coef,
         model.vf_coef, model.max_grad_norm)
    assert h.learning_rate == model.learning_rate and h.clip_range == model.clip_range(1.0)
    assert model.policy.net_arch == dict(pi=h.net_arch, vf=h.net_arch) and model.policy.ortho_init == h.ortho_init
    assert model.policy.activation_fn is torch.nn.Tanh and h.activation == "tanh" and not h.normalize


@pytest.mark.parametrize("args, message", [
    (["--algo", "sb3-ppo-zoo", "--env", "CartpoleSwingUp"], "sb3-ppo-zoo: ppo_zoo.yaml has no rl-zoo3 entry for "
                                                           "'CartpoleSwingUp'; tasks with one: HalfCheetah-v5"),
    (["--algo", "sb3-ppo", "--env", "Pendulum-v1", "--iterations", "3"], "unknown config key 'iterations'"),
    (["--algo", "sb3-ppo", "--env", "Pendulum-v1", "--set", "sb3.activation=gelu"], "must be one of"),
    (["--algo", "sb3-ppo", "--env", "Pendulum-v1", "--set", "sb3.sde_sample_freq=-2"], "must be >= -1"),
])
def test_user_errors_are_one_line(tmp_path, capsys, args, message):
    code = run_cli(train_main, [*args, "--logdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_save_restore_continues_from_the_saved_state(tmp_path, monkeypatch):
    """A checkpoint (read with weights_only=True) holds the weights, Adam's state, VecNormalize's
    statistics and the counters; a restored job has them and trains on (fresh episodes, warned)."""
    cfg = load_config("sb3-ppo-zoo", "InvertedPendulum-v5", {**TINY, "sb3.timesteps": 128})
    trainer = Trainer(cfg)
    first, second = trainer.step(), trainer.step()
    trainer.save(tmp_path / "checkpoint.pt")
    state = load_checkpoint(tmp_path / "checkpoint.pt")["job"]
    assert state["num_timesteps"] == 64 and state["n_updates"] == 2 * cfg.sb3.n_epochs
    assert second["time/total_seconds"] == pytest.approx(first["time/iteration_seconds"]
                                                         + second["time/iteration_seconds"])
    assert state["seconds"] == second["time/total_seconds"]
    again = Trainer(cfg)
    monkeypatch.setattr("steinrl.baselines.sb3_ppo._RESUME_WARNED", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again.restore(tmp_path / "checkpoint.pt")
    a, b = trainer.job.runs[0].model, again.job.runs[0].model
    for key, value in a.policy.state_dict().items():
        torch.testing.assert_close(b.policy.state_dict()[key], value, rtol=0, atol=0)
    assert b.policy.optimizer.state_dict()["state"][0]["step"] == a.policy.optimizer.state_dict()["state"][0]["step"]
    np.testing.assert_array_equal(b.env.obs_rms.var, a.env.obs_rms.var)
    assert b.env.ret_rms.count == a.env.ret_rms.count and b.num_timesteps == 64 and again.iteration == 2
    assert [str(w.message) for w in caught if "fresh episodes" in str(w.message)] == [
        "sb3-ppo-zoo: a resumed run starts fresh episodes (SB3's envs are not saved), so it does not continue "
        "exactly as the uninterrupted run would"]
    scalars = again.step()
    assert scalars["time/total_env_steps"] == 96 and again.job.runs[0].model._n_updates == 3 * cfg.sb3.n_epochs
    assert scalars["time/total_seconds"] == pytest.approx(state["seconds"] + scalars["time/iteration_seconds"])
    trainer.close(), again.close()


def test_train_command_writes_a_run_directory(tmp_path, capsys):
    code = run_cli(train_main, ["--algo", "sb3-ppo", "--env", "InvertedPendulum-v5", "--logdir", str(tmp_path),
                                "--run-name", "r", "--set", "sb3.timesteps=64", "--set", "sb3.n_steps=32",
                                "--set", "sb3.batch_size=32", "--no-progress", "--set", "run.tensorboard=false"])
    assert code == 0, capsys.readouterr().err
    run = tmp_path / "InvertedPendulum-v5" / "sb3-ppo" / "r"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["time/total_env_steps"] for r in rows] == [32, 64]
    assert (run / "checkpoint.pt").is_file() and "sb3:" in (run / "config.yaml").read_text()
    assert "64 env steps" in capsys.readouterr().err


def test_loaded_policy_normalises_observations_as_vecnormalize_does():
    """The policy a checkpoint loads acts on raw observations exactly as SB3's own policy on a
    ``VecNormalize(training=False)`` env with the run's statistics (zoo's evaluation setup)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    cfg = load_config("sb3-ppo-zoo", "InvertedPendulum-v5", {**TINY, "sb3.timesteps": 96})
    trainer = Trainer(cfg)
    while not trainer.done:
        trainer.step()
    loaded = trainer.job.load_policy(cfg, trainer.job.state_dict(), "cpu")
    ours = evaluate_policy(loaded, make_vec_env(cfg.env, n_envs=1, seed=7), n_eval_episodes=3, deterministic=True,
                           return_episode_rewards=True)
    zoo_eval_env = VecNormalize(make_vec_env(cfg.env, n_envs=1, seed=7), training=False, norm_reward=False)
    zoo_eval_env.obs_rms = trainer.job.runs[0].model.env.obs_rms
    theirs = evaluate_policy(trainer.job.runs[0].model, zoo_eval_env, n_eval_episodes=3, deterministic=True,
                             return_episode_rewards=True)
    assert ours == theirs and len(ours[0]) == 3
    trainer.close()


def test_shipped_zoo_file_names_its_source():
    text = (ROOT / "configs" / "sb3" / "ppo_zoo.yaml").read_text()
    assert "DLR-RM/rl-baselines3-zoo" in text and "hyperparams/ppo.yml" in text
    for task in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Swimmer-v5", "InvertedDoublePendulum-v5", "Ant-v5",
                 "MountainCarContinuous-v0"):
        assert load_config("sb3-ppo-zoo", task).sb3.normalize  # every one of these entries normalises


#: the equal wall-clock study's spec whose setting each task file ships (the rest: the zoo's values alone)
STUDY_SPECS = {task: f"mujoco_stein_equal_time_anneal_{name}.yaml" for task, name in (
    ("HalfCheetah-v5", "halfcheetah"), ("Walker2d-v5", "walker2d"), ("Swimmer-v5", "swimmer"),
    ("InvertedDoublePendulum-v5", "idp"), ("Ant-v5", "ant"))}
TASKS = ("HalfCheetah-v5", "Walker2d-v5", "Swimmer-v5", "InvertedDoublePendulum-v5", "Ant-v5",
         "MountainCarContinuous-v0")  # Hopper-v5's file holds SB3's defaults (measured better there)


def _value_lines_name_their_source(task):
    lines = (ROOT / "configs" / f"{task}.yaml").read_text().splitlines()
    values = [line for line in lines if line.strip() and not line.lstrip().startswith("#") and not line.endswith(":")]
    return values and all("  # " in line for line in values)


def test_hopper_file_gives_every_particle_sb3s_default_ppo():
    """configs/Hopper-v5.yaml holds SB3's PPO defaults, read from SB3's own signatures, per particle
    (with VecNormalize's normalisation), M = 4 and alpha = 1: the setting measured to hop."""
    import inspect

    from stable_baselines3 import PPO
    from stable_baselines3.common.policies import ActorCriticPolicy

    sb3 = {k: v.default for k, v in inspect.signature(PPO.__init__).parameters.items()}
    policy = {k: v.default for k, v in inspect.signature(ActorCriticPolicy.__init__).parameters.items()}
    ours = load_config("svgd-ppo", "Hopper-v5")
    est = ours.estimator
    assert (ours.particles, ours.temperature) == (4, 1.0)
    assert ours.rollout.batch_size == sb3["n_steps"] and est.minibatches == sb3["n_steps"] // sb3["batch_size"]
    assert (est.discount, est.gae_lambda, est.clip_range, est.epochs, est.ent_coef, est.max_grad_norm) == \
        (sb3["gamma"], sb3["gae_lambda"], sb3["clip_range"], sb3["n_epochs"], sb3["ent_coef"], sb3["max_grad_norm"])
    assert ours.update.lr == ours.critic.lr == sb3["learning_rate"] and ours.critic.vf_coef == sb3["vf_coef"]
    assert ours.critic.clip_range_vf == sb3["clip_range_vf"] and not est.anneal_lr  # SB3: a constant rate
    assert ours.policy.log_std_init == policy["log_std_init"] and policy["ortho_init"]
    assert ours.policy.init == ours.critic.init == "orthogonal" and ours.policy.activation == "tanh"
    assert ours.policy.hidden == ours.critic.hidden == [64, 64]  # SB3's MlpPolicy net_arch default
    assert ours.policy.normalize_obs and est.scale_rewards and est.reward_clip == 10.0  # VecNormalize's
    assert ours.iterations * ours.rollout.batch_size >= 10**6
    assert ours.rollout.horizon == gym.spec("Hopper-v5").max_episode_steps
    assert _value_lines_name_their_source("Hopper-v5")


@pytest.mark.parametrize("task", TASKS)
def test_task_file_gives_every_particle_the_zoo_entry(task):
    """configs/<task>.yaml (steinrl's PPO) holds the same rl-zoo3 values as configs/sb3/ppo_zoo.yaml
    (sb3-ppo-zoo), translated to steinrl's keys; every value line says where it comes from."""
    ours, zoo = load_config("svgd-ppo", task), load_config("sb3-ppo-zoo", task).sb3
    rollout = zoo.n_steps * zoo.n_envs
    assert (ours.rollout.batch_size, ours.rollout.envs_per_particle) == (rollout, zoo.n_envs)
    assert ours.rollout.sampling == "continuing"
    study = STUDY_SPECS.get(task)
    if study is None:  # not measured with particles: the zoo's budget per particle, the zoo's init
        assert ours.iterations == -(-zoo.timesteps // rollout)
        assert (ours.policy.init == "orthogonal") == zoo.ortho_init
    else:  # the equal wall-clock study's setting: its M, temperature, init, anneal and env steps in all
        spec = yaml.safe_load((ROOT / "research" / "sweeps" / study).read_text())
        cfg, total = spec["config"], spec["config"]["total_steps"]
        assert (ours.particles, ours.temperature, ours.policy.init, ours.critic.init, ours.estimator.anneal_lr) == \
            (cfg["particles"], cfg["temperature"], cfg["policy.init"], cfg["critic.init"], cfg["estimator.anneal_lr"])
        per_iteration = ours.particles * rollout
        assert (ours.iterations - 1) * per_iteration < total <= ours.iterations * per_iteration
    est = ours.estimator
    assert (est.discount, est.gae_lambda, est.clip_range, est.epochs, est.ent_coef, est.max_grad_norm) == \
        (zoo.gamma, zoo.gae_lambda, zoo.clip_range, zoo.n_epochs, zoo.ent_coef, zoo.max_grad_norm)
    assert est.minibatches == max(1, rollout // zoo.batch_size)
    assert ours.update.lr == ours.critic.lr == zoo.learning_rate and ours.critic.vf_coef == zoo.vf_coef
    assert ours.policy.hidden == ours.critic.hidden == zoo.net_arch and ours.policy.activation == zoo.activation
    assert ours.policy.log_std_init == zoo.log_std_init
    assert ours.policy.normalize_obs == est.scale_rewards == zoo.normalize
    assert ours.rollout.horizon == gym.spec(task).max_episode_steps
    assert _value_lines_name_their_source(task)


def test_sb3_ppo_stops_at_max_seconds_of_training_time():
    """A wall-clock budget for side-by-side runs: the run is done once every seed's training time
    (summed over resumes) passes max_seconds, whatever sb3.timesteps says."""
    cfg = steinrl.load_config("sb3-ppo", "Pendulum-v1", {"max_seconds": 2.0, "sb3.timesteps": 10**7,
                                                          "sb3.n_steps": 64, "sb3.batch_size": 64})
    job = steinrl.Trainer(cfg).job
    job.runs[0].seconds = 1.9
    assert not job.done(1)
    job.runs[0].seconds = 2.0
    assert job.done(1)
    assert not steinrl.Trainer(cfg.replace({"max_seconds": None})).job.done(1)
    with pytest.raises(steinrl.ConfigError, match="max_seconds"):
        steinrl.load_config("sb3-ppo", "Pendulum-v1", {"max_seconds": 0})
