"""Many seeds in one batch: each seed's run is the run of that seed alone."""

import pytest
import torch

import steinrl
from steinrl.rl.seeds import SeedBatchJob

CONFIG = {"particles": 3, "envs_per_particle": 2, "batch_size": 20, "iterations": 3, "critic.steps": 2,
          "rollout.sampling": "continuing", "rollout.env_backend": "torch"}
KEYS = ("rollout/ep_rew_max_particle", "rollout/ep_rew_mean", "train/surrogate", "train/log_prior",
        "train/bandwidth", "train/kernel_mean", "train/value_loss", "train/attractive_norm", "train/repulsive_norm")


def alone(cfg, seed, n=3):
    trainer = steinrl.Trainer(cfg.replace({"seed": seed}))
    return trainer, [trainer.step() for _ in range(n)]


@pytest.mark.parametrize("algo", ["s2vgd-a2c", "svgd-reinforce"])
def test_each_seed_of_a_batch_runs_as_it_would_alone(algo):
    cfg = steinrl.load_config(algo, "CartpoleSwingUp",
                              {k: v for k, v in CONFIG.items() if algo.endswith("a2c") or k != "critic.steps"})
    seeds = [5, 0, 11]
    job = SeedBatchJob(cfg, seeds)
    batched = [job.step(i) for i in range(3)]
    for s, seed in enumerate(seeds):
        _, rows = alone(cfg, seed)
        for it in range(3):
            for key in KEYS:
                if key in rows[it]:
                    assert batched[it][s][key] == pytest.approx(rows[it][key], rel=1e-4, abs=1e-5, nan_ok=True), \
                        (seed, it, key)


def test_a_seeds_state_in_the_batch_is_its_single_seed_checkpoint(tmp_path):
    """Seed 1 of a 2-seed batch, saved after 2 iterations and continued alone, goes on
    as seed 1 alone does."""
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", CONFIG)
    job = SeedBatchJob(cfg, [4, 7])
    for i in range(2):
        job.step(i)
    single = steinrl.Trainer(cfg.replace({"seed": 7}))
    single.load_state_dict({**single.state_dict(), "iteration": 2, "job": job.state_dicts()[1]})
    reference, rows = alone(cfg, 7)
    assert single.step()["train/surrogate"] == pytest.approx(rows[2]["train/surrogate"], rel=1e-4)
    # and back: per-seed states joined into a fresh batch continue the batch
    again = SeedBatchJob(cfg, [4, 7])
    again.load_state_dicts(job.state_dicts())
    assert again.step(2)[1]["train/surrogate"] == pytest.approx(rows[2]["train/surrogate"], rel=1e-4)


def test_seed_batches_need_continuing_sampling():
    with pytest.raises(steinrl.ConfigError, match="continuing or cut"):
        SeedBatchJob(steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {**CONFIG, "rollout.sampling": "whole_episodes"}),
                     [0, 1])


def test_cli_seeds_write_one_run_directory_per_seed_equal_to_the_seed_alone(tmp_path):
    """``steinrl train --seeds 3,8``: two locked run directories; seed 8's metrics equal
    ``--seed 8`` trained alone (torch backend), and its directory resumes alone."""
    import json

    from steinrl.run.cli import train_main

    common = ["--algo", "svgd-a2c", "--env", "Cartpole", "--particles", "3", "--iterations", "3", "--logdir",
              str(tmp_path), "--no-progress", "--set", "rollout.sampling=continuing", "--set", "rollout.batch_size=20",
              "--set", "rollout.envs_per_particle=2", "--set", "critic.steps=2"]
    assert train_main([*common, "--seeds", "3,8", "--run-name", "b"]) == 0
    assert train_main([*common, "--seed", "8", "--run-name", "alone", "--set", "rollout.env_backend=torch"]) == 0
    root = tmp_path / "Cartpole" / "svgd-a2c"
    assert sorted(p.name for p in root.iterdir()) == ["alone", "b-seed3", "b-seed8"]

    def rows(name):
        return [json.loads(line) for line in (root / name / "metrics.jsonl").read_text().splitlines()]

    batched, single = rows("b-seed8"), rows("alone")
    assert len(batched) == len(single) == 3
    for b, s in zip(batched, single):
        for key in ("rollout/ep_rew_mean", "train/surrogate", "train/value_loss"):
            assert b[key] == pytest.approx(s[key], rel=1e-4, abs=1e-5), key
    assert rows("b-seed3")[0]["rollout/ep_rew_mean"] != batched[0]["rollout/ep_rew_mean"]
    assert train_main(["--resume", str(root / "b-seed8"), "--iterations", "4", "--no-progress"]) == 0
    assert train_main(["--resume", str(root / "alone"), "--iterations", "4", "--no-progress"]) == 0
    assert rows("b-seed8")[3]["train/surrogate"] == pytest.approx(rows("alone")[3]["train/surrogate"], rel=1e-4)


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1,1"], "distinct"),
    (["--seeds", "1,a"], "integers"),
    (["--seeds", "1,2", "--seed", "3"], "cannot be combined"),
    (["--seeds", "1,2", "--set", "rollout.sampling=whole_episodes"], "continuing or cut"),
])
def test_cli_seeds_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    from steinrl.run.cli import run_cli, train_main

    code = run_cli(train_main, ["--algo", "svgd-a2c", "--env", "Cartpole", "--logdir", str(tmp_path),
                                "--set", "rollout.sampling=continuing", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())
