"""Many seeds in one batch (``Trainer(cfg, seeds)``): each seed's run is the run of that seed alone."""

import pytest
import torch

import steinrl
from steinrl.core.groups import module_group, module_join
from steinrl.run.checkpoint import CheckpointError

CONFIG = {"particles": 3, "envs_per_particle": 2, "batch_size": 22, "iterations": 3, "critic.steps": 2,
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
    trainer = steinrl.Trainer(cfg, seeds)
    batched = [trainer.step_seeds() for _ in range(3)]
    for s, seed in enumerate(seeds):
        _, rows = alone(cfg, seed)
        for it in range(3):
            for key in KEYS:
                if key in rows[it]:
                    assert batched[it][s][key] == pytest.approx(rows[it][key], rel=1e-4, abs=1e-5, nan_ok=True), \
                        (seed, it, key)


def test_a_seeds_state_in_the_batch_is_its_single_seed_checkpoint(tmp_path):
    """Seed 7 of a 2-seed batch, saved after 2 iterations and continued alone, goes on as
    seed 7 alone does; the seeds' checkpoints restored into a fresh batch continue the batch."""
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", CONFIG)
    batch = steinrl.Trainer(cfg, [4, 7])
    for _ in range(2):
        batch.step_seeds()
    batch.save(tmp_path / "s4.pt", 0)
    batch.save(tmp_path / "s7.pt", 1)
    _, rows = alone(cfg, 7)
    single = steinrl.Trainer(cfg.replace({"seed": 7})).restore(tmp_path / "s7.pt")
    assert single.iteration == 2
    assert single.step()["train/surrogate"] == pytest.approx(rows[2]["train/surrogate"], rel=1e-4)
    again = steinrl.Trainer(cfg, [4, 7]).restore([tmp_path / "s4.pt", tmp_path / "s7.pt"])
    assert again.step_seeds()[1]["train/surrogate"] == pytest.approx(rows[2]["train/surrogate"], rel=1e-4)
    with pytest.raises(CheckpointError, match="different config"):  # seed 4's file is not seed 7's
        steinrl.Trainer(cfg.replace({"seed": 7})).restore(tmp_path / "s4.pt")


def test_particle_axes_are_declared_not_guessed_from_sizes():
    """S = 2 seeds of M = 2 particles on a task whose observation has S·M = 4 entries: the
    shared observation statistics (4,) stay whole while every per-particle tensor of
    leading size S·M is cut, and joining the cuts gives the batch's state back."""
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {**CONFIG, "particles": 2})
    trainer = steinrl.Trainer(cfg, [0, 1])
    policy = trainer.job.agent.policy
    assert policy.obs_dim == 4 == 2 * cfg.particles
    with torch.no_grad():
        policy.obs_norm.mean.copy_(torch.arange(4.0))
    full = policy.state_dict()
    parts = [module_group(policy, i, 2) for i in range(2)]
    for key, value in full.items():
        if key.startswith("obs_norm."):
            assert all(torch.equal(p[key], value) for p in parts), key
        else:
            assert all(p[key].shape[0] == value.shape[0] // 2 for p in parts), key
            assert torch.equal(parts[1][key], value[2:]), key
    joined = module_join(policy, parts)
    assert all(torch.equal(joined[k], v) for k, v in full.items())
    assert torch.equal(trainer.state_dict(1)["job"]["agent"]["policy"]["obs_norm.mean"], torch.arange(4.0).double())


def test_cli_seeds_write_one_run_directory_per_seed_equal_to_the_seed_alone(tmp_path):
    """``steinrl train --seeds 3,8``: two locked run directories; seed 8's metrics equal
    ``--seed 8`` trained alone (torch backend), and its directory resumes alone."""
    import json

    from steinrl.run.cli import train_main

    common = ["--algo", "svgd-a2c", "--env", "Cartpole", "--particles", "3", "--iterations", "3", "--logdir",
              str(tmp_path), "--no-progress", "--set", "rollout.sampling=continuing", "--set", "rollout.batch_size=22",
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


def test_cli_seeds_say_whose_runs_they_are_and_which_seed_the_progress_shows(tmp_path, capsys):
    """On the CPU a batch steps the torch twins where ``--seed S`` alone steps the numpy envs: the
    run starts with a note naming the command whose run each seed is, and the progress line's
    ``best=`` is named by the seed it belongs to (the first)."""
    from steinrl.rl.job import PolicyGradientJob
    from steinrl.run.cli import train_main

    assert train_main(["--algo", "svgd-a2c", "--env", "Cartpole", "--particles", "3", "--iterations", "2",
                       "--logdir", str(tmp_path), "--no-progress", "--set", "run.log_every=1", "--set",
                       "rollout.sampling=continuing", "--set", "rollout.batch_size=22", "--set",
                       "rollout.envs_per_particle=2", "--set", "critic.steps=2", "--seeds", "3,8"]) == 0
    err = capsys.readouterr().err
    note = err.splitlines()[0]
    assert note.startswith("note: the batch steps the envs' torch twins (rollout.env_backend=torch")
    assert "seed S is the run of `--seed S --set rollout.env_backend=torch` alone, not of `--seed S` (on cpu it " \
        "steps the numpy envs)" in note and "float rounding" in note
    progress = [line for line in err.splitlines() if line.startswith("[svgd-a2c Cartpole seeds 3,8] iteration")]
    assert len(progress) == 2 and all(" seed=3 ret=" in line and " best=" in line for line in progress)
    # where a seed alone steps the torch twins too (a GPU), only the rounding is left to say
    cuda = steinrl.load_config("svgd-a2c", "Cartpole", {**CONFIG, "rollout.env_backend": "auto", "device": "cuda"})
    assert "seed S is the run of `--seed S` alone, to float rounding only" in PolicyGradientJob.batch_note(cuda, [0, 1])
