"""Trustworthy runs: loading never executes code, runs never mix or lose data, and every
bad input gives one line and exit 2 with nothing written (issue: trustworthy runs)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import yaml
from conftest import ROOT, run_script, signal_training, tiny_config, trained_run

import steinrl
from steinrl.run.checkpoint import CheckpointError, load_checkpoint
from steinrl.run.cli import evaluate_main, run_cli, train_main
from steinrl.run.logger import read_metrics

TINY_ARGS = ["--particles", "2", "--set", "envs_per_particle=2", "--set", "batch_size=32", "--set", "horizon=30",
             "--set", "critic.steps=2", "--no-progress"]


class Exploit:
    """Unpickling this runs a shell command (a crafted 'checkpoint')."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def write_exploit(path, marker):
    torch.save({"format": "steinrl.trainer", "format_version": 2, "job": Exploit(marker)}, path)


def cli(main, args, capsys):
    capsys.readouterr()  # drop what earlier steps printed
    code = run_cli(main, args)
    return code, capsys.readouterr().err


# --- 1. no load path executes code ------------------------------------------------------
def test_no_load_path_runs_a_crafted_pickle(tmp_path, capsys):
    from steinrl.run.load import load_run
    from steinrl.sb3 import SVPG, EnsembleSB3Policy

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    write_exploit(evil, marker)
    torch.load(evil, weights_only=False)  # the file really is malicious: an unsafe load runs it
    assert marker.exists()
    marker.unlink()

    run = trained_run(tmp_path / "runs")
    shutil.copy(evil, run / "checkpoint.pt")
    trainer = steinrl.Trainer(tiny_config(env="Cartpole"))
    loaders = [lambda: load_checkpoint(evil), lambda: trainer.restore(evil), lambda: load_run(run),
               lambda: EnsembleSB3Policy.load(evil), lambda: SVPG.load(evil)]
    for load in loaders:
        with pytest.raises(CheckpointError):
            load()
    assert cli(evaluate_main, [str(run), "--episodes", "1"], capsys)[0] == 2
    assert cli(train_main, ["--resume", str(run), "--iterations", "5"], capsys)[0] == 2
    assert not marker.exists()


# --- 2. one process per run directory ---------------------------------------------------
def test_a_second_run_in_the_same_directory_exits_2_naming_the_first_pid(tmp_path):
    cmd = [sys.executable, str(ROOT / "train.py"), "--iterations", "100000", *TINY_ARGS, "--logdir", str(tmp_path),
           "--run-name", "r"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        metrics = tmp_path / "CartpoleSwingUp" / "s2vgd-a2c" / "r" / "metrics.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
            time.sleep(0.05)
        second = run_script("train.py", "--iterations", "3", *TINY_ARGS, "--logdir", str(tmp_path), "--run-name", "r")
        assert second.returncode == 2
        assert f"in use by another process (PID {first.pid})" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)


def test_auto_named_runs_never_share_a_directory(tmp_path):
    from steinrl.run.cli import _claim_new_run

    cfg = tiny_config(**{"run.logdir": str(tmp_path)})
    a, b = _claim_new_run(cfg), _claim_new_run(cfg)
    assert a.path != b.path and a.path.is_dir() and b.path.is_dir()
    a.release()
    b.release()


# --- 3. --iterations on resume is the total; invalid values write nothing ---------------
@pytest.mark.parametrize("iterations, message", [
    ("0", "must be in [1, 10**9], got 0"), ("-5", "must be in [1, 10**9], got -5"),
    ("2", "is done (2 iterations); --iterations, --rounds, --total-steps and --max-seconds are totals")])
def test_bad_resume_iterations_exit_2_and_write_nothing(tmp_path, capsys, iterations, message):
    run = trained_run(tmp_path)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    code, err = cli(train_main, ["--resume", str(run), "--iterations", iterations], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


# --- 4. scientific notation -------------------------------------------------------------
def test_set_lr_in_scientific_notation(tmp_path, capsys):
    code, _ = cli(train_main, ["--iterations", "1", *TINY_ARGS, "--set", "lr=1e-3", "--logdir", str(tmp_path),
                               "--run-name", "r"], capsys)
    assert code == 0
    saved = yaml.safe_load((tmp_path / "CartpoleSwingUp" / "s2vgd-a2c" / "r" / "config.yaml").read_text())
    assert saved["update"]["lr"] == 0.001


# --- 5. divergence stops with iteration, particle and quantity; no bad checkpoint --------
def test_a_huge_step_size_stops_the_run_and_claims_no_checkpoint(tmp_path, capsys):
    code, err = cli(train_main, ["--iterations", "5", *TINY_ARGS, "--set", "update.lr=1e6", "--logdir",
                                 str(tmp_path), "--run-name", "r"], capsys)
    run = tmp_path / "CartpoleSwingUp" / "s2vgd-a2c" / "r"
    assert code == 3, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: training diverged: non-finite") and "iteration" in line and "particle(s)" in line
    if (run / "checkpoint.pt").exists():
        state = load_checkpoint(run)
        assert all(torch.isfinite(t).all() for t in state["job"]["agent"]["policy"].values())
        assert f"checkpoint (iteration {state['iteration']})" in line
    else:
        assert "no checkpoint was written" in line


# --- 6. broken checkpoints --------------------------------------------------------------
@pytest.mark.parametrize("damage", ["empty", "truncated", "random"])
def test_broken_checkpoints_give_one_line_and_exit_2(tmp_path, capsys, damage):
    run = trained_run(tmp_path)
    ckpt = run / "checkpoint.pt"
    data = ckpt.read_bytes()
    ckpt.write_bytes({"empty": b"", "truncated": data[: len(data) // 2],
                      "random": np.random.default_rng(0).bytes(4096)}[damage])
    for main, args in ((evaluate_main, [str(run), "--episodes", "1"]), (train_main, ["--resume", str(run),
                                                                                     "--iterations", "4"])):
        code, err = cli(main, args, capsys)
        assert code == 2 and err.startswith("error:") and "checkpoint" in err and len(err.strip().splitlines()) == 1


# --- 7. resume needs a checkpoint; TensorBoard steps continue without duplicates ---------
def test_resume_without_checkpoint_exits_2(tmp_path, capsys):
    run = trained_run(tmp_path)
    (run / "checkpoint.pt").unlink()
    code, err = cli(train_main, ["--resume", str(run), "--iterations", "4"], capsys)
    assert code == 2 and "has no checkpoint.pt" in err


def test_resumed_tensorboard_steps_have_no_duplicates(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    run = trained_run(tmp_path, **{"run.tensorboard": True})  # 2 iterations, checkpoint at 2
    stale = SummaryWriter(str(run))  # a killed process had logged iterations 2 and 3 past the checkpoint
    for step in (2, 3):
        stale.add_scalar("rollout/ep_rew_max_particle", 1e9, step)
    stale.close()
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 2, "rollout/ep_rew_max_particle": 1e9}\n{"iteration": 3, "rollout/ep_rew_')
    assert cli(train_main, ["--resume", str(run), "--iterations", "4", "--no-progress"], capsys)[0] == 0
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    events = acc.Scalars("rollout/ep_rew_max_particle")
    assert [e.step for e in events] == [0, 1, 2, 3] and max(e.value for e in events) < 1e9
    assert [r["iteration"] for r in read_metrics(run)] == [0, 1, 2, 3]


# --- 8. more bad inputs -----------------------------------------------------------------
def test_logdir_that_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, err = cli(train_main, ["--iterations", "1", *TINY_ARGS, "--logdir", str(blocker)], capsys)
    assert code == 2 and "cannot create run directory" in err and blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_logdir(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    code, err = cli(train_main, ["--iterations", "1", *TINY_ARGS, "--logdir", str(ro)], capsys)
    assert code == 2 and "cannot create run directory" in err


@pytest.mark.parametrize("args, message", [
    (["--run-name", "../.."], "--run-name must be a plain directory name"),
    (["--seed", "-1"], "'seed' in the command line must be in [0, 2**32), got -1"),
    (["--env", ""], "Unknown environment ''"),
    (["--iterations", "x"], "argument --iterations: invalid int value: 'x'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_more_bad_train_inputs(tmp_path, capsys, args, message):
    code, err = cli(train_main, [*args, "--logdir", str(tmp_path)], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_bad_evaluate_inputs(tmp_path, capsys, monkeypatch):
    run = trained_run(tmp_path)
    code, err = cli(evaluate_main, [str(run), "--json", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same on every machine
    code, err = cli(evaluate_main, [str(run), "--device", "cuda"], capsys)
    assert code == 2 and "CUDA is not available" in err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # one GPU: cuda:1 does not exist
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    code, err = cli(evaluate_main, [str(run), "--device", "cuda:1"], capsys)
    assert code == 2 and "has 1 CUDA device(s); use cuda:0" in err and len(err.strip().splitlines()) == 1


# --- 9. no orphaned temporary files -------------------------------------------------------
def test_stale_temporary_checkpoints_are_removed_on_resume(tmp_path, capsys):
    run = trained_run(tmp_path)
    (run / "checkpoint.pt.x1y2.tmp").write_bytes(b"half a checkpoint")
    assert cli(train_main, ["--resume", str(run), "--iterations", "3", "--no-progress"], capsys)[0] == 0
    assert not list(run.glob("*.tmp"))


# --- 10. SIGTERM saves; resume keeps the original command -------------------------------
def test_sigterm_saves_exits_143_and_resume_keeps_the_command(tmp_path):
    run = tmp_path / "CartpoleSwingUp" / "s2vgd-a2c" / "r"
    metrics = run / "metrics.jsonl"
    code, err = signal_training(["--iterations", "100000", *TINY_ARGS, "--logdir", str(tmp_path), "--run-name", "r"],
                                metrics, signal.SIGTERM)
    assert code == 143, err
    assert "SIGTERM" in err and "Traceback" not in err
    done = load_checkpoint(run)["iteration"]
    assert len(read_metrics(run)) == done >= 2
    first_command = yaml.safe_load((run / "config.yaml").read_text())["_meta"]["command"]
    proc = run_script("train.py", "--resume", str(run), "--iterations", str(done + 1), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    meta = yaml.safe_load((run / "config.yaml").read_text())["_meta"]
    assert meta["command"] == first_command and "--resume" in meta["resumed_with"][-1]["command"]


# --- the small things users notice --------------------------------------------------------
def test_mujoco_task_without_mujoco_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['mujoco'] = sys.modules['envpool'] = None; "
            "from steinrl.run.cli import run_cli, train_main; "
            f"sys.exit(run_cli(train_main, ['--env', 'InvertedDoublePendulum-v5', '--logdir', {str(tmp_path)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and 'pip install "steinrl[mujoco]"' in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_plot_groups_by_env_and_algo_counts_seeds_once_and_warns_on_unequal_lengths(tmp_path, capsys):
    from steinrl.run.plotting import plot_runs

    runs = tmp_path / "runs"
    trained_run(runs, run_name="a", seed=0)
    trained_run(runs, run_name="b", seed=1, iterations=3)
    trained_run(runs, run_name="c", seed=0)  # seed 0 again, in another directory
    trained_run(runs, run_name="d", seed=0, algo="svgd-a2c")
    capsys.readouterr()
    drawn = plot_runs([runs, runs / "Cartpole"], tmp_path / "c.png")  # overlapping paths: each run once
    err = capsys.readouterr().err
    assert set(drawn) == {("Cartpole", "s2vgd-a2c"), ("Cartpole", "svgd-a2c")}
    s2 = drawn[("Cartpole", "s2vgd-a2c")]
    assert s2["iteration"] == [0, 1, 2] and s2["n"] == [2, 2, 1]
    assert "seed 0 of s2vgd-a2c on Cartpole appears in more than one run directory" in err
    assert "unequal lengths (2 to 3 iterations)" in err
    assert drawn[("Cartpole", "svgd-a2c")]["n"] == [1, 1]


def test_finite_flags_name_exactly_the_particles_with_an_inf_or_nan():
    """FiniteFlags marks a particle non-finite iff one of its values in any tensor is inf or
    NaN: huge finite values (whose sum overflows) stay finite, and the flags AND over calls."""
    from steinrl.core.finite import FiniteFlags

    big = torch.full((4, 3), 3e38)  # finite; the sum of a row overflows float32
    weights = torch.zeros(4, 2, 2)
    weights[1, 0, 1] = float("nan")
    weights[2, 1, 0] = -float("inf")
    flags = FiniteFlags()
    flags.add("parameter", [big, None, weights])
    flags.add("parameter", torch.tensor([[1.0], [2.0], [3.0], [float("inf")]]))
    assert flags.flags["parameter"].tolist() == [True, False, False, False]
    flags.add("gradient", [])
    assert "gradient" not in flags.flags
