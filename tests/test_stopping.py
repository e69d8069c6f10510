"""Stopping rules in env steps (``total_steps``, SB3's total_timesteps) and wall-clock (``max_seconds``)."""

import json

import pytest

import steinrl
from steinrl.run.cli import train_main

SMALL = {"particles": 3, "rollout.envs_per_particle": 2, "rollout.batch_size": 40, "critic.steps": 2,
         "rollout.sampling": "cut"}


def test_total_steps_stops_at_the_iteration_that_crosses_it():
    """Cut sampling on DoublePendulum (never terminates, horizon 500 > 20 steps per env): every
    iteration is 3 particles x 2 envs x 20 steps = 120 valid env steps, so 500 steps take
    ceil(500 / 120) = 5 iterations and end at 600."""
    cfg = steinrl.load_config("svgd-a2c", "DoublePendulum", {**SMALL, "total_steps": 500, "iterations": 2})
    trainer = steinrl.Trainer(cfg)
    assert trainer.job.num_steps == 5  # the progress bar's total: iterations are ignored
    rows = []
    while not trainer.done:
        rows.append(trainer.step())
    assert [r["time/total_env_steps"] for r in rows] == [120.0, 240.0, 360.0, 480.0, 600.0]
    assert trainer.job.progress(trainer.iteration) == 1.0


def test_env_steps_and_seconds_survive_a_resume(tmp_path):
    cfg = steinrl.load_config("svgd-a2c", "DoublePendulum", {**SMALL, "total_steps": 500})
    first = steinrl.Trainer(cfg)
    for _ in range(2):
        first.step()
    first.save(tmp_path / "c.pt")
    again = steinrl.Trainer(cfg).restore(tmp_path / "c.pt")
    assert again.job.env_steps == [240] and again.job.seconds == pytest.approx(first.job.seconds)
    assert [again.step()["time/total_env_steps"] for _ in range(3)] == [360.0, 480.0, 600.0] and again.done


def test_max_seconds_stops_after_the_iteration_that_passes_it(tmp_path, capsys):
    argv = ["--algo", "svgd-a2c", "--env", "DoublePendulum", "--particles", "3", "--iterations", "50",
            "--max-seconds", "1e-9", "--logdir", str(tmp_path), "--run-name", "r", "--no-progress",
            "--set", "rollout.envs_per_particle=2", "--set", "rollout.batch_size=40", "--set", "critic.steps=2",
            "--set", "rollout.sampling=cut"]
    assert train_main(argv) == 0
    rows = (tmp_path / "DoublePendulum" / "svgd-a2c" / "r" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1 and json.loads(rows[0])["time/total_env_steps"] == 120.0
    assert "120 env steps" in capsys.readouterr().err  # the run summary


def test_total_steps_from_the_cli_and_bad_values(tmp_path, capsys):
    from steinrl.run.cli import run_cli

    base = ["--algo", "svgd-a2c", "--env", "DoublePendulum", "--particles", "3", "--logdir", str(tmp_path),
            "--no-progress", "--set", "rollout.envs_per_particle=2", "--set", "rollout.batch_size=40",
            "--set", "critic.steps=2", "--set", "rollout.sampling=cut"]
    assert run_cli(train_main, [*base, "--run-name", "t", "--total-steps", "250"]) == 0
    rows = (tmp_path / "DoublePendulum" / "svgd-a2c" / "t" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 3
    capsys.readouterr()
    assert run_cli(train_main, [*base, "--run-name", "u", "--total-steps", "0"]) == 2
    err = capsys.readouterr().err
    assert "total_steps" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "DoublePendulum" / "svgd-a2c" / "u").exists()
