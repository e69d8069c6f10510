"""train.py / evaluate.py as a user runs them: errors exit 2 with one clear line."""

import json
import signal

import pytest
from conftest import run_script, signal_training

from steinrl.run.cli import run_cli, train_main

TINY = ["--particles", "2", "--set", "envs_per_particle=2", "--set", "batch_size=32", "--set", "horizon=30",
        "--no-progress"]


@pytest.mark.parametrize("args, message", [
    (["--algo", "svgd-foo"], "unknown algo 'svgd-foo'; valid algos: svgd-reinforce, s2vgd-reinforce"),
    (["--env", "CartpoleSwingup"], "CartpoleSwingUp"),
    (["--set", "learning_rate=1e-3"], "unknown config key 'learning_rate' in the command line"),
    (["--particles", "0"], "config key 'particles' in the command line must be in [1, 10**9], got 0"),
    (["--set", "update.lr=-0.1"], "config key 'update.lr' in the command line must be in (0, 1e6], got -0.1"),
    (["--set", "lr=1e300"], "config key 'update.lr' in the command line must be in (0, 1e6], got '1e300'"),
    (["--set", "discount=fast"], "config key 'estimator.discount' in the command line must be a number, got 'fast'"),
    (["--set", "layer.K=1", "--algo", "svgd-a2c"], "unknown config key 'layer.K' in the command line"),
    (["--set", "critic.steps=2", "--algo", "svgd-reinforce"], "unknown config section 'critic'"),
    (["--config", "does/not/exist.yaml"], "config file not found: does/not/exist.yaml"),
    (["--resume", "runs/nope"], "cannot resume: runs/nope has no config.yaml"),
    (["--device", "cuda:0"], "CUDA is not available"),
])
def test_train_user_errors_exit_2(tmp_path, monkeypatch, capsys, args, message):
    """In-process (fast): the same ``run_cli`` wrapper train.py's __main__ uses."""
    if "cuda" in args[-1]:  # the same on every machine: this process sees no CUDA
        import torch

        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    logdir = [] if "--resume" in args else ["--logdir", str(tmp_path)]
    code = run_cli(train_main, [*args, *logdir])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert err.strip().startswith("error:") and len(err.strip().splitlines()) == 1


def test_user_error_from_the_real_script_has_no_traceback(tmp_path):
    proc = run_script("train.py", "--algo", "svgd-foo", "--logdir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unknown algo") and "Traceback" not in proc.stderr


def test_bad_yaml_key_names_key_and_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("particles: 4\ntemprature: 3\n")
    assert run_cli(train_main, ["--config", str(bad), "--logdir", str(tmp_path)]) == 2
    assert f"unknown config key 'temprature' in {bad} (did you mean 'temperature'?)" in capsys.readouterr().err


def test_unknown_env_lists_short_names(tmp_path, capsys):
    assert run_cli(train_main, ["--env", "NoSuchTask-v9", "--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    for name in ("Cartpole", "CartpoleSwingUp", "DoublePendulum"):
        assert name in err


def test_train_then_evaluate_table_json_png(tmp_path):
    proc = run_script("train.py", "--algo", "s2vgd-a2c", "--env", "Cartpole", "--iterations", "2", *TINY,
                      "--logdir", str(tmp_path), "--run-name", "r0")
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "Cartpole" / "s2vgd-a2c" / "r0"
    cfg_text = (run / "config.yaml").read_text()
    assert "steinrl_version" in cfg_text and "algo: s2vgd-a2c" in cfg_text
    assert list(run.glob("events.out.tfevents.*"))
    # a second seed so the plot has a band
    proc = run_script("train.py", "--algo", "s2vgd-a2c", "--env", "Cartpole", "--iterations", "2", "--seed", "1",
                      *TINY, "--logdir", str(tmp_path), "--run-name", "r1")
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "curves.png"
    proc = run_script("evaluate.py", str(run), "--episodes", "3", "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    assert "particle 0" in proc.stdout and "ensemble (sample)" in proc.stdout and "ensemble (mean)" in proc.stdout
    result = json.loads((run / "evaluation.json").read_text())
    assert len(result["rows"]) == 2 + 2 and all(r["episodes"] == 3 for r in result["rows"])
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    proc = run_script("evaluate.py", str(tmp_path / "Cartpole"), "--plot", str(png), "--plot-only")
    assert proc.returncode == 0, proc.stderr
    proc = run_script("evaluate.py", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "no run directory or checkpoint" in proc.stderr


def test_evaluate_video_gif(tmp_path):
    proc = run_script("train.py", "--env", "Cartpole", "--iterations", "1", *TINY, "--logdir", str(tmp_path),
                      "--run-name", "r")
    assert proc.returncode == 0, proc.stderr
    gif = tmp_path / "ep.gif"
    proc = run_script("evaluate.py", str(tmp_path / "Cartpole" / "s2vgd-a2c" / "r"), "--episodes", "1",
                      "--video", str(gif))
    assert proc.returncode == 0, proc.stderr
    assert gif.read_bytes()[:3] == b"GIF"


def test_ctrl_c_saves_and_resume_finishes(tmp_path):
    run = tmp_path / "CartpoleSwingUp" / "s2vgd-a2c" / "r"
    metrics = run / "metrics.jsonl"
    code, err = signal_training(["--iterations", "100000", *TINY, "--logdir", str(tmp_path),
                                 "--run-name", "r"], metrics, signal.SIGINT)
    assert code == 130, err
    assert "checkpoint saved" in err and "Traceback" not in err
    import torch

    state = torch.load(run / "checkpoint.pt", weights_only=True)
    done = state["iteration"]
    assert done >= 2
    assert metrics.read_text().count("\n") == done
    proc = run_script("train.py", "--resume", str(run), "--iterations", str(done + 2), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert metrics.read_text().count("\n") == done + 2


def test_find_runs_follows_symlinked_run_directories(tmp_path):
    from steinrl.run.plotting import find_runs

    real = tmp_path / "elsewhere" / "seed0"
    real.mkdir(parents=True)
    (real / "config.yaml").write_text("algo: svgd-a2c\n")
    (tmp_path / "runs" / "Task").mkdir(parents=True)
    (tmp_path / "runs" / "Task" / "svgd-a2c").symlink_to(real.parent, target_is_directory=True)
    assert [p.name for p in find_runs([tmp_path / "runs"])] == ["seed0"]
