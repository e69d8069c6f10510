"""Bandit agents and the bandit job: every agent plays, Stein TS learns a linear bandit,
LinFullPost's posterior is the closed form, runs resume exactly, Showdown's optimizer."""

import numpy as np
import pytest
import torch
from conftest import stepped_with_a_restore

import steinrl
from steinrl.bandits.job import BanditJob
from steinrl.core.optim import TFRMSprop, inverse_time_lr

SMALL = {"rounds": 100, "particles": 4, "protocol.refit_every": 25, "protocol.refit_steps": 5,
         "protocol.minibatch": 32, "run.progress": False}


def play(algo, env, **overrides):
    trainer = steinrl.Trainer(steinrl.load_config(algo, env, {**SMALL, **overrides}))
    rows = []
    while not trainer.done:
        rows.append(trainer.step())
    return trainer, rows


@pytest.mark.parametrize("env", ["Mushroom", "Wheel"])
@pytest.mark.parametrize("algo", BanditJob.algorithm_names())
def test_every_bandit_agent_plays(algo, env):
    trainer, rows = play(algo, env, rounds=200)
    last = rows[-1]
    assert trainer.job.played == 200 and last["bandit/rounds"] == 200
    assert last["bandit/cumulative_regret"] >= 0 and np.isfinite(last["bandit/cumulative_reward"])
    job = trainer.job
    k = job.num_arms
    assert list(job.arms[: 2 * k]) == [t % k for t in range(2 * k)]  # each arm pulled twice first
    # the logged totals are those of the arms actually played
    rounds = np.arange(200)
    assert last["bandit/cumulative_reward"] == pytest.approx(job.stream.rewards[rounds, job.arms].sum())
    best = job.stream.expected_rewards.max(1)
    played = job.stream.expected_rewards[rounds, job.arms]
    assert last["bandit/cumulative_regret"] == pytest.approx((best - played).sum())


LEARN = {"rounds": 400, "protocol.refit_steps": 10}
LEARN_SEEDS = (0, 1)
VARIATIONAL_AGENTS = ("bbb-ts", "badam-ts", "kflow-ts", "rdp-ts")


def _regret_of_arms(job, rounds):
    """Σ_t max_a E[r | x_t, a] − E[r | x_t, a_t] of the arms the job played, and of the best fixed arm."""
    expected = job.stream.expected_rewards[:rounds]
    gap = expected.max(1, keepdims=True) - expected  # (rounds, k)
    return float(gap[np.arange(rounds), job.arms[:rounds]].sum()), float(gap.sum(0).min())


@pytest.mark.parametrize("algo", [a for a in BanditJob.algorithm_names() if a != "uniform"])
def test_every_learning_agent_beats_the_best_fixed_arm_on_a_linear_bandit(algo):
    """Linear bandit (10-d contexts, 8 arms), 400 rounds, 10-step refits every 25 rounds, seeds
    0 and 1: the mean regret, recomputed from the arms played, is below 0.8 x the best fixed
    arm's (in hindsight, from the task's expected rewards; uniform play is worse still). The
    variational agents use Showdown's [50] network here (their [100, 100] learns slower in
    such short refits). Measured ratios: linfullpost 0.33, the Stein agents 0.37-0.47, kflow
    0.42, bbb and egreedy 0.52, greedy 0.55, rdp 0.57, neurallinear 0.66; badam-ts, the slowest
    learner, 0.76, so its bound is 0.9."""
    extra = {"model.hidden": [50]} if algo in VARIATIONAL_AGENTS else {}
    regret, best_arm = [], []
    for seed in LEARN_SEEDS:
        trainer, _ = play(algo, "Linear", **LEARN, **extra, seed=seed)
        r, b = _regret_of_arms(trainer.job, LEARN["rounds"])
        regret.append(r)
        best_arm.append(b)
    bound = 0.9 if algo == "badam-ts" else 0.8
    assert np.mean(regret) < bound * np.mean(best_arm), (regret, best_arm)


def test_uniform_play_has_uniforms_expected_regret():
    """The uniform agent's regret over 400 rounds is within 4 sd of its expectation
    Σ_t (max_a E − mean_a E), sd from the per-round variance of the gap under a uniform arm."""
    trainer, _ = play("uniform", "Linear", **LEARN, seed=0)
    expected = trainer.job.stream.expected_rewards[:400]
    gap = expected.max(1, keepdims=True) - expected
    regret, _ = _regret_of_arms(trainer.job, 400)
    assert abs(regret - gap.mean(1).sum()) < 4.0 * np.sqrt(gap.var(1).sum()), (regret, gap.mean(1).sum())


def test_stein_ts_with_a_linear_model_beats_uniform_on_a_linear_bandit():
    settings = {"rounds": 400, "protocol.refit_every": 20, "protocol.refit_steps": 30, "protocol.minibatch": 64,
                "protocol.optimizer": "adam", "protocol.lr": 0.05, "protocol.lr_decay": 0.0, "task.noise_std": 0.1,
                "seed": 3}
    stein = play("svgd-ts", "Linear", **settings, **{"model.hidden": []})[1][-1]["bandit/cumulative_regret"]
    uniform = play("uniform", "Linear", **settings)[1][-1]["bandit/cumulative_regret"]
    assert stein < 0.5 * uniform, (stein, uniform)


def test_linfullpost_posterior_is_the_closed_form_of_the_played_rounds():
    trainer, _ = play("linfullpost", "Wheel", rounds=150)
    job, cfg = trainer.job, trainer.config
    posterior = job.agent.posterior
    for arm in range(job.num_arms):
        rows = job.arms[:150] == arm
        z = np.concatenate([job.stream.contexts[:150][rows].astype(np.float64), np.ones((rows.sum(), 1))], 1)
        y = job.stream.rewards[np.arange(150)[rows], arm]
        precision = z.T @ z + cfg.agent.lambda_prior * np.eye(z.shape[1])
        mean = np.linalg.solve(precision, z.T @ y)
        b = cfg.agent.b0 + 0.5 * (y @ y - mean @ precision @ mean)
        np.testing.assert_allclose(posterior.mean[arm], mean, rtol=1e-8, atol=1e-10)
        assert posterior.a[arm] == pytest.approx(cfg.agent.a0 + rows.sum() / 2)
        assert posterior.b[arm] == pytest.approx(b, rel=1e-8)


@pytest.mark.parametrize("algo", ["s2vgd-ts", "linfullpost", "neurallinear", "egreedy"])
def test_save_restore_continues_exactly(tmp_path, algo):
    cfg = steinrl.load_config(algo, "Mushroom", {**SMALL, "likelihood.learn_noise": True} if algo.endswith("ts")
                              else SMALL)
    expected, resumed = stepped_with_a_restore(cfg, tmp_path / "c.pt")
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    assert strip(resumed) == strip(expected)


def test_tf_rmsprop_against_a_hand_computation():
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = TFRMSprop([p], lr=0.1)
    grads = [torch.tensor([0.5, 3.0], dtype=torch.float64), torch.tensor([-1.0, 0.1], dtype=torch.float64)]
    ms, theta = np.ones(2), np.array([1.0, -2.0])
    for g in grads:
        p.grad = g.double()
        opt.step()
        ms = 0.9 * ms + 0.1 * g.numpy() ** 2  # TF1: the accumulator starts at 1
        theta = theta - 0.1 * g.numpy() / np.sqrt(ms + 1e-10)
    np.testing.assert_allclose(p.detach().numpy(), theta, rtol=1e-12)
    assert inverse_time_lr(0.1, 0.5, 0) == 0.1 and inverse_time_lr(0.1, 0.5, 98) == pytest.approx(0.1 / 50)


def test_particle_step_clipping_limits_each_particles_step():
    from steinrl import ParticleOptimizer

    p = torch.nn.Parameter(torch.zeros(3, 2, dtype=torch.float64))
    opt = ParticleOptimizer([p], "independent", lr=1.0, optimizer="sgd", max_direction_norm=1.0)
    g = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 10.0]], dtype=torch.float64)
    opt.step((p * g).sum(1))  # log target with gradient g
    np.testing.assert_allclose(p.detach().numpy(), [[0.6, 0.8], [0.3, 0.4], [0.0, 1.0]], rtol=1e-12)


def test_bandit_algorithm_on_a_control_task_names_the_mismatch():
    with pytest.raises(steinrl.ConfigError, match="'Cartpole' is a task of rl algorithms"):
        steinrl.load_config("s2vgd-ts", "Cartpole")
    with pytest.raises(steinrl.ConfigError, match="'Mushroom' is a task of bandit algorithms"):
        steinrl.load_config("s2vgd-a2c", "Mushroom")


@pytest.mark.parametrize("env", ["Mushroom", "Wheel"])
def test_a_resume_with_more_rounds_plays_the_rounds_a_longer_run_would(tmp_path, env):
    """The first n rounds do not depend on the run's length: a run of 1100 rounds stopped
    after 2 blocks and resumed with --rounds 1500 plays what a 1500-round run plays."""
    from steinrl.bandits.job import draw_stream
    from steinrl.bandits.tasks import BANDIT_TASKS

    task = BANDIT_TASKS.get(env).from_options()
    short, long = draw_stream(task, 1100, 3), draw_stream(task, 1500, 3)
    np.testing.assert_array_equal(short.contexts, long.contexts[:1100])
    np.testing.assert_array_equal(short.rewards, long.rewards[:1100])
    overrides = {"rounds": 1500, "protocol.refit_every": 50, "protocol.refit_steps": 2, "seed": 3}
    shorter = steinrl.load_config("greedy", env, {**overrides, "rounds": 1100})
    expected, resumed = stepped_with_a_restore(steinrl.load_config("greedy", env, overrides), tmp_path / "c.pt",
                                               first_cfg=shorter)
    keys = ("bandit/cumulative_reward", "bandit/cumulative_regret", "bandit/rounds")
    assert [[r[k] for k in keys] for r in resumed] == [[r[k] for k in keys] for r in expected]
