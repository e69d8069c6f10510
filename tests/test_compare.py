"""The side-by-side evaluation (steinrl.run.compare_eval, ``steinrl compare``): the ensemble's
acting modes on a hand-made ensemble whose returns are known, the run bookkeeping (best
training particle, env steps, seconds) on hand-written metrics, and the command end to end."""

import csv
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import trained_run

from steinrl.run.cli import run_cli, steinrl_main, train
from steinrl.run.compare import COLUMNS
from steinrl.run.compare_eval import (
    best_training_particle,
    episode_returns,
    episode_stats,
    evaluate_record,
    find_runs,
    select_particle,
    total_env_steps,
    wall_seconds,
)
from steinrl.run.config import load_config
from steinrl.sb3 import EnsembleSB3Policy

#: Particle i's action is BIAS[i] whatever it sees; an episode is 5 steps of reward = action.
BIAS = [-1.0, 1.5, 0.5]
STEPS = 5


class ActionIsReward(gym.Env):
    """Observation 0 always; reward = the action; 5 steps per episode."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), float(action[0]), False, self.t >= STEPS, {}


def hand_made_ensemble():
    """Three particles acting BIAS[i]: zero biases everywhere (so every hidden unit is tanh(0) = 0
    on the zero observation) but the output layer's, which is BIAS."""
    cfg = load_config("svgd-ppo", "Pendulum-v1", {"particles": len(BIAS)})
    policy = EnsembleSB3Policy(ActionIsReward.observation_space, ActionIsReward.action_space, cfg, seed=0)
    with torch.no_grad():
        for name, param in policy.ensemble.named_parameters():
            if name.endswith("bias"):
                param.zero_()
        policy.ensemble.net.layers[-1].bias.copy_(torch.tensor(BIAS).unsqueeze(1))
    return policy


class Walker(ActionIsReward):
    """ActionIsReward whose body starts at x = 3 and moves by the action each step, reported in
    ``info["x_position"]`` as Gymnasium's locomotion tasks do."""

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed)
        self.x = 3.0
        return obs, {"x_position": self.x}

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        self.x += float(action[0])
        return obs, reward, terminated, truncated, {"x_position": self.x}


def test_forward_distance_is_the_x_displacement_of_each_counted_episode():
    """Particle i moves BIAS[i] per step for 5 steps from x = 3: distance 5 BIAS[i] in every
    episode (not the final x, not summed over episodes); a task without x_position gets NaN."""
    policy = hand_made_ensemble()
    for i, b in enumerate(BIAS):
        policy.set_act_mode("particle", particle=i)
        returns, lengths, forward = episode_stats(policy, Walker, 3, seed=0)
        assert lengths == [STEPS] * 3 and forward == pytest.approx([STEPS * b] * 3)
    _, _, forward = episode_stats(policy, ActionIsReward, 2, seed=0)
    assert len(forward) == 2 and all(math.isnan(d) for d in forward)


def test_forward_distance_on_hopper_is_the_torso_x_of_mujoco():
    """On Hopper-v5 the distance is the MuJoCo torso coordinate qpos[0] at the episode's end
    minus its value at the reset (read from the simulator, not from info)."""
    pytest.importorskip("mujoco")
    from steinrl import envs
    from steinrl.run.compare_eval import ForwardDistance

    env = ForwardDistance(envs.make("Hopper-v5"))
    env.reset(seed=0)
    x0 = float(env.unwrapped.data.qpos[0])
    action = np.full(3, 0.5, np.float32)
    for _ in range(60):
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert info["forward_distance"] == pytest.approx(float(env.unwrapped.data.qpos[0]) - x0, abs=1e-12)
    assert abs(info["forward_distance"]) > 1e-3  # the body did move
    env.close()


def _row(env, algo, m, policy, mean, forward=math.nan, length=1000.0, params=""):
    return {"env": env, "algo": algo, "particles": m, "params": params, "policy": policy, "eval_mean": mean,
            "ep_len_mean": length, "forward_mean": forward, "total_env_steps": 100, "wall_s": 1.0}


def test_the_ablation_table_orders_a_task_and_names_the_better_sb3_ppo():
    """Per task: Stein rows, then independent, then sb3-ppo and sb3-ppo-zoo, whatever order the
    runs came in; "better SB3 PPO" is the higher of the two SB3 seed means (and says which one is
    missing when only one ran); forward distance with its t interval and the runs that moved;
    a Stein row without its independent twin (same estimator and M) is named under the table."""
    from scipy import stats

    from steinrl.run.compare import summary_table

    hopper = [_row("Hopper-v5", "sb3-ppo-zoo", 1, "sb3", 772.9, forward=0.2),
              _row("Hopper-v5", "independent-ppo", 4, "ensemble-select", 1028.0, forward=0.5),
              _row("Hopper-v5", "svgd-ppo", 4, "ensemble-select", 250.0, forward=0.1, length=170.0),
              _row("Hopper-v5", "svgd-ppo", 4, "ensemble-select", 3000.0, forward=12.0, length=1000.0),
              _row("Hopper-v5", "sb3-ppo", 1, "sb3", 2700.0, forward=10.0),
              _row("Hopper-v5", "sb3-ppo", 1, "sb3", 2907.4, forward=11.0),
              _row("Hopper-v5", "svgd-ppo", 8, "ensemble-select", 900.0, forward=0.3)]
    pendulum = [_row("Pendulum-v1", "sb3-ppo-zoo", 1, "sb3", -200.0, length=200.0),
                _row("Pendulum-v1", "kron-a2c", 4, "best-train", -300.0, length=200.0)]
    lines = summary_table(hopper + pendulum).splitlines()
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if line.startswith("| ")]
    assert [(c[0], c[1], c[2]) for c in body] == [
        ("Hopper-v5", "svgd-ppo", "4"), ("Hopper-v5", "svgd-ppo", "8"), ("Hopper-v5", "independent-ppo", "4"),
        ("Hopper-v5", "sb3-ppo", "1"), ("Hopper-v5", "sb3-ppo-zoo", "1"),
        ("Pendulum-v1", "kron-a2c", "4"), ("Pendulum-v1", "sb3-ppo-zoo", "1")]
    better = (2700.0 + 2907.4) / 2  # sb3-ppo's mean, above sb3-ppo-zoo's 772.9
    assert {c[7] for c in body[:5]} == {f"{better:.1f} (sb3-ppo)"}
    assert {c[7] for c in body[5:]} == {"-200.0 (sb3-ppo-zoo; no sb3-ppo run)"}
    svgd4 = body[0]
    half = stats.t.ppf(0.975, 1) * np.std([0.1, 12.0], ddof=1) / np.sqrt(2)
    assert svgd4[5] == "2" and svgd4[8] == "585" and svgd4[9] == f"6.0 ± {half:.1f}" and svgd4[10] == "1/2"
    assert body[2][10] == "0/1" and body[3][10] == "2/2"
    assert body[5][8] == "200" and body[5][9] == "–" and body[5][10] == "–"  # Pendulum has no x position
    notes = [line for line in lines if line.startswith("- ")]
    assert notes == ["- Hopper-v5: no independent-ppo run with M = 8 beside svgd-ppo",
                     "- Pendulum-v1: no independent-a2c run with M = 4 beside kron-a2c"]
    assert "moved ≥ 10 m" in summary_table(hopper, moved=10.0)
    assert "| 1/2 |" in summary_table(hopper[2:4], moved=10.0)
    assert summary_table(hopper[:1]).splitlines()[2].split("|")[8].strip() == "772.9 (sb3-ppo-zoo; no sb3-ppo run)"


def test_the_table_counts_the_runs_that_reach_the_tasks_reward_threshold():
    """The "reward threshold" column: the runs whose evaluation return is at least the task's
    Gymnasium reward_threshold (MountainCarContinuous-v0's 90: the goal reached at little action
    cost; SparseHalfCheetah's 1: on average one step past 5 m), "–" where a task has none."""
    from steinrl.run.compare import reward_threshold, summary_table

    assert reward_threshold("MountainCarContinuous-v0") == 90.0
    assert reward_threshold("SparseHalfCheetah") == reward_threshold("steinrl/SparseHalfCheetah-v1") == 1.0
    assert reward_threshold("Walker2d-v5") is None and reward_threshold("NoSuchTask-v9") is None
    rows = [_row("MountainCarContinuous-v0", "svgd-ppo", 4, "ensemble-select", mean, length=200.0)
            for mean in (95.0, 50.0, 90.0)]
    rows += [_row("SparseHalfCheetah", "independent-ppo", 4, "ensemble-select", mean) for mean in (0.0, 0.9, 12.0)]
    rows += [_row("NoSuchTask-v9", "sb3-ppo", 1, "sb3", 5.0)]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in summary_table(rows).splitlines()[2:]
            if line.startswith("| ")]
    assert [c[11] for c in body] == ["2/3 ≥ 90", "1/3 ≥ 1", "–"]
    assert summary_table(rows).splitlines()[0].split("|")[12].strip() == "reward threshold"


def test_each_particle_and_the_mean_action_return_what_they_are_built_to():
    policy = hand_made_ensemble()
    for i, b in enumerate(BIAS):
        policy.set_act_mode("particle", particle=i)
        returns, lengths = episode_returns(policy, ActionIsReward, 3, seed=0)
        assert returns == pytest.approx([STEPS * b] * 3) and lengths == [STEPS] * 3
    policy.set_act_mode("mean")
    assert episode_returns(policy, ActionIsReward, 2, seed=0)[0] == pytest.approx([STEPS * np.mean(BIAS)] * 2)


def test_select_picks_the_best_particle_of_the_held_out_episodes():
    chosen, scores, steps = select_particle(hand_made_ensemble(), ActionIsReward, episodes=3, seed=1000)
    assert chosen == 1 and scores == pytest.approx([STEPS * b for b in BIAS])
    assert steps == len(BIAS) * 3 * STEPS


def test_sample_mode_draws_a_particle_per_episode():
    policy = hand_made_ensemble()
    policy.set_act_mode("sample", seed=0)
    returns = episode_returns(policy, ActionIsReward, 40, seed=0)[0]
    per_particle = {round(STEPS * b, 6) for b in BIAS}
    assert {round(r, 6) for r in returns} == per_particle  # whole episodes of one particle; all three drawn
    counts = [sum(round(r, 6) == round(STEPS * b, 6) for r in returns) for b in BIAS]
    assert min(counts) >= 5  # 40 uniform draws of 3: each at least 5 times (P(fail) < 1e-3)


@pytest.mark.parametrize("mode", ["particle", "sample", "mean"])
@pytest.mark.parametrize("deterministic", [True, False])
def test_the_predictor_compare_scores_with_acts_as_the_sb3_policy(mode, deterministic):
    """EnsemblePredictor (what evaluate_record scores a steinrl ensemble with, no SB3 import) and
    EnsembleSB3Policy play the same episodes on Pendulum, in every acting mode, actions clipped alike."""
    from steinrl import envs
    from steinrl.run.compare_eval import EnsemblePredictor

    cfg = load_config("svgd-ppo", "Pendulum-v1", {"particles": 3, "policy.log_std_init": 1.0})
    env = envs.make("Pendulum-v1")
    sb3 = EnsembleSB3Policy(env.observation_space, env.action_space, cfg, act_mode=mode, particle=2, seed=4)
    ours = EnsemblePredictor(sb3.ensemble, env.action_space, act_mode=mode, particle=2, seed=4)
    env.close()

    def make_env():
        return envs.make("Pendulum-v1", max_episode_steps=30)

    assert episode_stats(ours, make_env, 3, 7, deterministic) == episode_stats(sb3, make_env, 3, 7, deterministic)


def test_best_training_particle_reads_the_last_iteration_with_episodes():
    rows = [{"particles/ep_rew_mean_00": 1.0, "particles/ep_rew_mean_01": 5.0, "particles/ep_rew_mean_02": 2.0},
            {"particles/ep_rew_mean_00": 9.0, "particles/ep_rew_mean_01": math.nan, "particles/ep_rew_mean_02": 3.0},
            {"particles/ep_rew_mean_00": math.nan, "particles/ep_rew_mean_01": math.nan,
             "particles/ep_rew_mean_02": math.nan}]
    assert best_training_particle(rows, 3) == 0  # the last row has no episodes: the one before it
    assert best_training_particle(rows[:1], 3) == 1
    assert best_training_particle([], 3) == 0


def test_env_steps_and_seconds_by_hand():
    steinrl_rows = [{"time/steps_per_particle": 210.0, "time/iteration_seconds": 0.5},
                    {"time/steps_per_particle": 190.0, "time/iteration_seconds": 0.25}]
    assert total_env_steps(steinrl_rows, 4) == (210 + 190) * 4 and wall_seconds(steinrl_rows) == 0.75
    sb3_rows = [{"time/total_env_steps": 64.0, "time/iteration_seconds": 1.0},
                {"time/total_env_steps": 128.0, "time/iteration_seconds": 2.0}]
    assert total_env_steps(sb3_rows, 1) == 128 and wall_seconds(sb3_rows) == 3.0
    assert math.isnan(total_env_steps([], 4))
    reported_every_100 = [{"time/iteration_seconds": 0.1, "time/total_seconds": 10.0, "time/total_env_steps": 3200.0},
                          {"time/iteration_seconds": 0.1, "time/total_seconds": 20.0, "time/total_env_steps": 6400.0}]
    assert wall_seconds(reported_every_100) == 20.0 and total_env_steps(reported_every_100, 4) == 6400.0


def test_a_sweep_trial_still_running_is_counted_as_unfinished():
    """A sweep trial's last report says whether it reached its stopping rule; the table counts
    the seeds that did not (a run directory's rows do not say: neither)."""
    from steinrl.run.compare import summary_table
    from steinrl.run.compare_eval import finished

    assert finished([{"done": False}, {"done": True}]) is True and finished([{"done": False}]) is False
    assert finished([{"iteration": 3}]) is None and finished([]) is None
    row = {"env": "Hopper-v5", "algo": "sb3-ppo", "particles": 1, "params": "", "policy": "sb3", "eval_mean": 10.0,
           "total_env_steps": 100, "wall_s": 1.0}
    table = summary_table([{**row, "finished": True}, {**row, "eval_mean": 30.0, "finished": False},
                           {**row, "finished": None}])
    assert "| Hopper-v5 | sb3-ppo | 1 |  | sb3 | 3 (1 unfinished) | 16.7 ± " in table


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A tiny svgd-ppo run and a tiny sb3-ppo run on Pendulum-v1, trained through the CLI's run loop."""
    root = tmp_path_factory.mktemp("runs")
    trained_run(root, "svgd-ppo", "Pendulum-v1", horizon=50, batch_size=100)
    train(load_config("sb3-ppo", "Pendulum-v1", {"sb3.timesteps": 128, "sb3.n_steps": 64, "sb3.horizon": 50,
                                                 "run.logdir": str(root), "run.run_name": "r", "run.progress": False,
                                                 "run.tensorboard": False}))
    return root


def test_evaluate_record_rows_of_both_kinds(two_runs):
    import json

    records = {r.path.parent.name: r for r in find_runs([two_runs])}
    assert set(records) == {"svgd-ppo", "sb3-ppo"}
    sb3 = evaluate_record(records["sb3-ppo"], episodes=2)
    assert [r["policy"] for r in sb3] == ["sb3"] and sb3[0]["total_env_steps"] == 128
    assert sb3[0]["iterations"] == 2 and sb3[0]["episodes"] == 2
    rows = evaluate_record(records["svgd-ppo"], episodes=2, heldout_episodes=1)
    assert [r["policy"] for r in rows] == ["best-train", "ensemble-select"]
    metrics = [json.loads(line) for line in (records["svgd-ppo"].path / "metrics.jsonl").read_text().splitlines()]
    last = metrics[-1]
    particles = [last[f"particles/ep_rew_mean_{i:02d}"] for i in range(3)]
    assert rows[0]["particle"] == int(np.nanargmax(particles))
    assert rows[0]["total_env_steps"] == sum(m["time/steps_per_particle"] for m in metrics) * 3
    assert rows[1]["selection_env_steps"] == 3 * 50  # 3 particles x 1 held-out episode of 50 steps
    assert [r["policy"] for r in evaluate_record(records["svgd-ppo"], episodes=1, ensemble="mean")][1] == \
        "ensemble-mean"


def test_compare_command_writes_the_table(two_runs, tmp_path, capsys):
    out = tmp_path / "cmp.csv"
    code = run_cli(steinrl_main, ["compare", str(two_runs), "--episodes", "1", "--heldout-episodes", "1",
                                  "--ensemble", "sample", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["algo"], r["policy"]) for r in rows) == [("sb3-ppo", "sb3"), ("svgd-ppo", "best-train"),
                                                             ("svgd-ppo", "ensemble-sample")]
    assert all(float(r["total_env_steps"]) > 0 and float(r["wall_s"]) > 0 for r in rows)
    # Pendulum's episodes run to the 50-step horizon; it has no x position, so no forward distance
    assert all(float(r["ep_len_mean"]) == 50 and math.isnan(float(r["forward_mean"])) for r in rows)
    assert sorted(int(r["particles"]) for r in rows) == [1, 3, 3]
    table = out.with_suffix(".md").read_text()
    assert "| Pendulum-v1 | svgd-ppo | 3 |  | best-train | 1 |" in table
    assert "| Pendulum-v1 | sb3-ppo | 1 |  | sb3 | 1 |" in table and "| 50 | – | – |" in table
    assert "Pendulum-v1: no independent-ppo run with M = 3 beside svgd-ppo" in table


@pytest.mark.parametrize("args, message", [
    (["compare", "/nonexistent/runs", "--out", "x.csv"], "no run, checkpoint or folder at /nonexistent/runs"),
    (["compare", ".", "--out", "x.txt"], "give a file name ending in .csv"),
    (["compare", ".", "--episodes", "0"], "--episodes must be in [1, 2**31)"),
    (["compare", ".", "--ensemble", "vote"], "invalid choice: 'vote'"),
    (["compare", ".", "--moved", "-1"], "--moved must be a finite number >= 0, got -1.0"),
    (["compare", ".", "--moved", "nan"], "--moved must be a finite number >= 0, got nan"),
])
def test_compare_user_errors_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert run_cli(steinrl_main, args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_compare_without_runs_is_an_error(tmp_path, capsys):
    assert run_cli(steinrl_main, ["compare", str(tmp_path)]) == 2
    assert "no trained runs" in capsys.readouterr().err


def test_an_sb3_run_is_not_an_ensemble(two_runs, capsys):
    """steinrl evaluate and EnsembleSB3Policy.from_run refuse an SB3 run in one line, naming steinrl compare."""
    from steinrl.errors import ConfigError

    run = two_runs / "Pendulum-v1" / "sb3-ppo" / "r"
    assert run_cli(steinrl_main, ["evaluate", str(run), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "sb3-ppo runs have one policy, not particles: score them with steinrl compare RUN" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="is a sb3-ppo run: it has no particle ensemble"):
        EnsembleSB3Policy.from_run(run)


def test_a_sweep_trial_directory_is_found_and_scored(tmp_path):
    """A Ray trial directory (params.json, result.json, checkpoint_NNNNNN/checkpoint.pt) is a run:
    its latest checkpoint is scored, its rows are result.json's (a resumed iteration once) and
    its grid values are named."""
    import json

    from steinrl.run.compare import compare_runs
    from steinrl.run.trainer import Trainer

    cfg = load_config("sb3-ppo", "Pendulum-v1", {"sb3.timesteps": 128, "sb3.n_steps": 64, "sb3.horizon": 20})
    trainer = Trainer(cfg)
    trial = tmp_path / "out" / "ray" / "spec" / "sb3-ppo_Pendulum-v1_seed0_abc_00000"
    reports = []
    for k in (0, 1):  # rows as sb3-ppo wrote them before it logged time/total_seconds: seconds are summed
        row = {key: v for key, v in trainer.step().items() if key != "time/total_seconds"}
        reports.append({"training_iteration": k + 1, **row})
        trainer.save(trial / f"checkpoint_00000{k}" / "checkpoint.pt")
    reports.insert(1, {**reports[0], "time/iteration_seconds": 99.0})  # reported twice (a resume): the last counts
    (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in reports))
    (trial / "params.json").write_text(json.dumps({"trial": {"algo": "sb3-ppo", "params": {"sb3.gamma": 0.99}}}))
    (rows,) = compare_runs([tmp_path / "out"], episodes=1)
    assert rows["run"] == str(trial) and rows["params"] == "sb3.gamma=0.99" and rows["iterations"] == 2
    assert rows["total_env_steps"] == 128
    assert rows["wall_s"] == pytest.approx(99.0 + reports[2]["time/iteration_seconds"])
    trainer.close()


def test_two_sweeps_of_one_algorithm_with_different_settings_are_not_pooled(tmp_path):
    """Trials of the same env and algo whose spec ``config`` differs (here the SB3 discount,
    and a key one sweep sets and the other leaves at its default) get their own rows: the
    differing values are named in ``params``, the shared ones (total steps) are not."""
    import json

    from steinrl.run.compare import compare_runs, summary_table
    from steinrl.run.trainer import Trainer

    cfg = load_config("sb3-ppo", "Pendulum-v1", {"sb3.timesteps": 64, "sb3.n_steps": 64, "sb3.horizon": 20})
    trainer = Trainer(cfg)
    row = {"training_iteration": 1, **trainer.step()}
    configs = {"a": {"sb3.timesteps": 64, "sb3.gamma": 0.9},
               "b": {"sb3.timesteps": 64, "sb3.gamma": 0.99, "sb3.ent_coef": 0.01}}
    for sweep, overrides in configs.items():
        trial = tmp_path / sweep / "ray" / sweep / "sb3-ppo_Pendulum-v1_seed0_abc_00000"
        trainer.save(trial / "checkpoint_000000" / "checkpoint.pt")
        (trial / "result.json").write_text(json.dumps(row) + "\n")
        (trial / "params.json").write_text(json.dumps({"trial": {"algo": "sb3-ppo", "params": {},
                                                                 "overrides": overrides}}))
    trainer.close()
    rows = compare_runs([tmp_path / "a", tmp_path / "b"], episodes=1)
    assert sorted(r["params"] for r in rows) == ["sb3.ent_coef=0.01 sb3.gamma=0.99",
                                                 "sb3.ent_coef=default sb3.gamma=0.9"]
    table = summary_table(rows)
    assert table.count("| Pendulum-v1 | sb3-ppo |") == 2 and "sb3.timesteps" not in table
    for trial in (tmp_path / "a").glob("ray/*/*"):  # a params.json steinrl sweep did not write: scored unnamed
        (trial / "params.json").write_text(json.dumps({"trial": ["not", "a", "dict"]}))
    assert [r["params"] for r in compare_runs([tmp_path / "a"], episodes=1)] == [""]


OLD_COLUMNS = "env,algo,params,seed,policy,eval_mean,eval_std,episodes,total_env_steps,wall_s,iterations,finished,"\
    "particle,selection_env_steps,run\n"  # a table of round 3: no particles, episode length or distance


def test_compare_reads_earlier_tables_back_and_labels_their_sources(tmp_path, capsys):
    """An archived comparison.csv joins the table as it is (nothing re-evaluated): its rows pool by
    seed, an SB3 row is one policy, ``particles=4`` gives the older rows their M, another label keeps
    two sources of one algorithm apart; the means are the hand-computed ones."""
    old = tmp_path / "old.csv"
    old.write_text(OLD_COLUMNS +
                   "Hopper-v5,svgd-ppo,,0,ensemble-select,1000.0,5,10,2000000,651,90,True,1,12000,r0\n"
                   "Hopper-v5,svgd-ppo,,1,ensemble-select,400.0,5,10,2000000,651,90,True,2,12000,r1\n"
                   "Hopper-v5,sb3-ppo-zoo,,0,sb3,700.0,5,10,1000000,651,489,True,,,r2\n")
    new = tmp_path / "new.csv"
    rows = [{"env": "Hopper-v5", "algo": "svgd-ppo", "particles": 4, "params": "", "seed": s,
             "policy": "ensemble-select",
             "eval_mean": v, "eval_std": 1.0, "episodes": 10, "ep_len_mean": 1000.0, "forward_mean": d,
             "total_env_steps": 3e6, "wall_s": 651.0, "finished": True, "run": f"n{s}"}
            for s, v, d in ((0, 3000.0, 12.0), (1, 2000.0, 0.5))]
    with open(new, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "joined.csv"
    code = run_cli(steinrl_main, ["compare", f"{old}:particles=4,kernel=weights", f"{new}:kernel=functions",
                                  "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    table = out.with_suffix(".md").read_text()
    t = 12.706204736174698  # Student t(0.975) with 1 degree of freedom; half width t s / sqrt(2), s = |a - b| / sqrt(2)
    weights = [line for line in table.splitlines() if "| kernel=weights | ensemble-select |" in line]
    functions = [line for line in table.splitlines() if "| kernel=functions | ensemble-select |" in line]
    sb3 = [line for line in table.splitlines() if "| sb3-ppo-zoo |" in line]
    assert len(weights) == len(functions) == len(sb3) == 1
    assert "| svgd-ppo | 4 |" in weights[0] and f"| 700.0 ± {t * 300.0:.1f} |" in weights[0]
    assert "| – | – | – |" in weights[0]  # no episode length or distance in the old table
    assert f"| 2500.0 ± {t * 500.0:.1f} |" in functions[0] and "| 1000 |" in functions[0]
    assert "| 1/2 |" in functions[0]  # 12 m moved, 0.5 m did not
    assert "| sb3-ppo-zoo | 1 | kernel=weights |" in sb3[0]  # a label names its source, SB3's rows too
    assert "700.0 (sb3-ppo-zoo kernel=weights; no sb3-ppo run)" in sb3[0]
    assert "Hopper-v5: no independent-ppo run with M = 4 beside svgd-ppo" in table
    with open(out) as f:
        assert len(list(csv.DictReader(f))) == 5


@pytest.mark.parametrize("text, message", [
    ("env,algo,seed\nHopper-v5,svgd-ppo,0\n", "is not a steinrl compare table: it has no policy, eval_mean, "
                                              "total_env_steps, wall_s column"),
    (OLD_COLUMNS + "Hopper-v5,svgd-ppo,,0,sb3,lots,5,10,1,1,1,True,,,r\n", "line 2: eval_mean must be a number, "
                                                                          "got 'lots'"),
])
def test_compare_refuses_a_table_it_cannot_read_in_one_line(tmp_path, capsys, text, message):
    table = tmp_path / "t.csv"
    table.write_text(text)
    assert run_cli(steinrl_main, ["compare", str(table), "--out", str(tmp_path / "o" / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_compare_labels_must_be_key_value(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text(OLD_COLUMNS)
    assert run_cli(steinrl_main, ["compare", f"{table}:particles", "--out", str(tmp_path / "x.csv")]) == 2
    assert "after PATH: give key=value[,key=value], got 'particles'" in capsys.readouterr().err
