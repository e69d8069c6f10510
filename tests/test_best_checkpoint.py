"""The best checkpoint (steinrl/run/best.py): chosen by a periodic held-out evaluation, not the
training return; kept across a resume; scored by ``steinrl evaluate --checkpoint best``."""

import json

import pytest
import torch
from conftest import tiny_config, trained_run

import steinrl.run.best as best_module
from steinrl.run.checkpoint import load_checkpoint
from steinrl.run.cli import evaluate_main, run_cli, train_main
from steinrl.run.logger import read_metrics

TAG = "rollout/ep_rew_max_particle"


def scripted(scores: dict[int, float], calls: list[int] | None = None):
    """A held-out evaluation that gives ``scores[iteration]`` (particle 0), recording the iterations."""

    def heldout_score(trainer, seed_index=0, episodes=5):
        if calls is not None:
            calls.append(trainer.iteration)
        return scores[trainer.iteration], 0

    return heldout_score


def policy_weights(path) -> list[torch.Tensor]:
    return [t for _, t in sorted(load_checkpoint(path)["job"]["agent"]["policy"].items())]


def without_times(rows):
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


def test_the_choice_is_the_heldout_score_not_the_training_return(tmp_path, monkeypatch):
    # held-out scores that fall where the training return rises: the best is the lowest training return
    rows = []

    def against_training(trainer, seed_index=0, episodes=5):
        rows[:] = read_metrics(trainer_dir)
        return -rows[trainer.iteration - 1][TAG], 0

    trainer_dir = tmp_path / "Cartpole" / "s2vgd-a2c" / "r"
    monkeypatch.setattr(best_module, "heldout_score", against_training)
    run = trained_run(tmp_path, iterations=5, **{"run.best_every": 1, "run.checkpoint_every": 100})
    returns = [row[TAG] for row in read_metrics(run)]
    assert max(returns) > min(returns)  # a curve with a peak to pick wrongly
    best = json.loads((run / "best.json").read_text())
    lowest = returns.index(min(returns)) + 1  # iterations counted from 1
    assert best["iteration"] == lowest != returns.index(max(returns)) + 1 and best["score"] == -min(returns)
    assert load_checkpoint(run / "best.pt")["iteration"] == lowest
    straight = trained_run(tmp_path / "straight", iterations=lowest, **{"run.best_every": 0})
    kept, then = policy_weights(run / "best.pt"), policy_weights(straight / "checkpoint.pt")
    assert len(kept) == len(then) > 0 and all(torch.equal(a, b) for a, b in zip(kept, then))


def test_a_resumed_run_keeps_the_best_of_the_whole_run(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(best_module, "heldout_score", scripted({1: 5.0, 2: 1.0, 3: 2.0, 4: 3.0}, calls))
    run = trained_run(tmp_path, iterations=2, **{"run.best_every": 1})
    assert json.loads((run / "best.json").read_text())["iteration"] == 1
    assert load_checkpoint(run / "checkpoint.pt")["loop"]["best"]["score"] == 5.0
    assert run_cli(train_main, ["--resume", str(run), "--iterations", "4", "--no-progress"]) == 0
    assert calls == [1, 2, 3, 4]  # each iteration scored once, the resume going on after the checkpoint
    best = json.loads((run / "best.json").read_text())
    assert (best["iteration"], best["score"]) == (1, 5.0)  # not iteration 4's 3.0, the best since the resume
    assert load_checkpoint(run / "best.pt")["iteration"] == 1


def test_the_heldout_evaluation_leaves_the_training_numbers_alone_and_evaluate_scores_best(tmp_path, capsys):
    run = trained_run(tmp_path, iterations=4, **{"run.best_every": 2, "run.best_episodes": 2})
    plain = trained_run(tmp_path / "plain", iterations=4, **{"run.best_every": 0})
    assert without_times(read_metrics(run)) == without_times(read_metrics(plain))
    assert not (plain / "best.pt").exists()
    best = json.loads((run / "best.json").read_text())
    assert best["iteration"] in (2, 4) and best["episodes"] == 2 and best["seed"] == 1000
    cfg = tiny_config(env="Cartpole", iterations=4)
    import steinrl

    trainer = steinrl.Trainer(cfg)
    for _ in range(best["iteration"]):
        trainer.step()
    assert best_module.heldout_score(trainer, 0, 2) == (best["score"], best["particle"])  # the same episodes
    capsys.readouterr()
    assert run_cli(evaluate_main, [str(run), "--checkpoint", "best", "--episodes", "1"]) == 0
    scored = json.loads((run / "evaluation_best.json").read_text())
    assert scored["checkpoint"] == str(run / "best.pt")
    code = run_cli(evaluate_main, [str(plain), "--checkpoint", "best", "--episodes", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "has no best.pt" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value, message", [("-1", "best_every"), ("0", "best_episodes")])
def test_bad_best_options(tmp_path, capsys, value, message):
    key = "run.best_every" if message == "best_every" else "run.best_episodes"
    code = run_cli(train_main, ["--env", "Cartpole", "--iterations", "1", "--set", f"{key}={value}",
                                "--logdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_compare_scores_the_best_checkpoint(tmp_path, monkeypatch):
    from steinrl.run.compare import compare_runs

    monkeypatch.setattr(best_module, "heldout_score", scripted({1: 1.0, 2: 3.0, 3: 2.0}))
    run = trained_run(tmp_path, iterations=3, **{"run.best_every": 1})
    monkeypatch.undo()
    best = compare_runs([run], checkpoint="best", episodes=1, heldout_episodes=1)
    last = compare_runs([run], episodes=1, heldout_episodes=1)
    assert {r["run"] for r in best} == {str(run / "best.pt")} and {r["iterations"] for r in best} == {2}
    assert {r["run"] for r in last} == {str(run)} and {r["iterations"] for r in last} == {3}
    assert compare_runs([run / "best.pt"], episodes=1, heldout_episodes=1)[0]["run"] == str(run / "best.pt")


def test_each_seed_of_a_batch_keeps_its_own_best(tmp_path, monkeypatch, capsys):
    def by_seed(trainer, seed_index=0, episodes=5):  # seed 0 peaks at iteration 1, seed 1 at 2
        return {(0, 1): 2.0, (0, 2): 1.0, (1, 1): 1.0, (1, 2): 2.0}[seed_index, trainer.iteration], seed_index

    monkeypatch.setattr(best_module, "heldout_score", by_seed)
    code = run_cli(train_main, ["--env", "Cartpole", "--seeds", "0,1", "--iterations", "2", "--particles", "2",
                                "--set", "envs_per_particle=2", "--set", "batch_size=32", "--set", "horizon=30",
                                "--set", "critic.steps=2", "--set", "run.best_every=1", "--set",
                                "rollout.sampling=continuing", "--no-progress", "--logdir", str(tmp_path),
                                "--run-name", "b"])
    assert code == 0, capsys.readouterr().err
    for seed, iteration in ((0, 1), (1, 2)):
        run = tmp_path / "Cartpole" / "s2vgd-a2c" / f"b-seed{seed}"
        best = json.loads((run / "best.json").read_text())
        assert (best["iteration"], best["particle"]) == (iteration, seed)
        assert load_checkpoint(run / "best.pt")["config"]["seed"] == seed
