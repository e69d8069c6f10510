"""First contact as a new user meets it (issue 41): the design's command's defaults, one thread
setting for every entry point, and messages that tell the truth (no prefix-matched flags, no
progress bar in a pipe, iteration numbers that agree, the right hint for a locked resume,
SB3's ``ret``, a missing ``compare`` path)."""

import ast
import io
import math
import re
from pathlib import Path

import pytest
import torch
from conftest import ROOT, signal_training, tiny_config, trained_run

import steinrl
from steinrl.run.cli import run_cli, train_main, train_parser
from steinrl.run.loop import ProgressCallback, RunDirectory, fit


def cli(main, args, capsys):
    capsys.readouterr()
    code = run_cli(main, args)
    return code, capsys.readouterr().err


# --- the design's command ---------------------------------------------------------------
def test_swingups_default_to_fast_sampling_and_the_paper_preset_restores_whole_episodes():
    for env in ("CartpoleSwingUp", "CartpoleSwingUpRllab"):
        cfg = steinrl.load_config("s2vgd-a2c", env)
        assert (cfg.rollout.sampling, cfg.rollout.envs_per_particle, cfg.critic.overlap) == ("continuing", 50, True)
        assert cfg.iterations == 1000 and cfg.particles == 16 and cfg.rollout.batch_size == 5000
        paper = steinrl.load_config("s2vgd-a2c", env, preset="paper")
        assert (paper.rollout.sampling, paper.rollout.envs_per_particle) == ("whole_episodes", 10)
        fast = steinrl.load_config("s2vgd-a2c", env, preset="fast")
        assert fast.to_dict() == cfg.to_dict()  # the shipped specs' `preset: fast` changes nothing here
    dp = steinrl.load_config("s2vgd-a2c", "DoublePendulum")
    assert (dp.rollout.sampling, dp.rollout.envs_per_particle) == ("whole_episodes", 10)  # as the study ran it


# --- threads ----------------------------------------------------------------------------
def test_every_trainer_sets_run_threads():
    """The Python API sets torch's threads as the CLI does (before: only the CLI and sweeps did,
    and a script or SVPG ran at torch's default, one thread per core, oversubscribing a busy machine)."""
    torch.set_num_threads(2)
    trainer = steinrl.Trainer(tiny_config(env="Cartpole"))
    assert torch.get_num_threads() == 1 == trainer.config.run.threads  # the default
    trainer.close()
    trainer = steinrl.Trainer(tiny_config(env="Cartpole", **{"run.threads": 2}))
    assert torch.get_num_threads() == 2
    trainer.close()
    torch.set_num_threads(3)
    steinrl.Trainer(tiny_config(env="Cartpole", **{"run.threads": 0})).close()  # 0: leave it
    assert torch.get_num_threads() == 3


def test_a_sweep_trial_gets_its_cpus_as_run_threads_unless_the_spec_sets_them(tmp_path):
    from steinrl.run.sweep import load_spec, make_trials, trial_config

    spec = tmp_path / "s.yaml"
    spec.write_text("algos: [svgd-a2c]\nenvs: [Cartpole]\nseeds: 1\niterations: 1\nresources: {cpu: 2}\n")
    assert trial_config(make_trials(load_spec(spec))[0]).run.threads == 2
    spec.write_text("algos: [svgd-a2c]\nenvs: [Cartpole]\nseeds: 1\niterations: 1\nresources: {cpu: 2}\n"
                    "config: {run.threads: 1}\n")
    assert trial_config(make_trials(load_spec(spec))[0]).run.threads == 1


# --- parsers ----------------------------------------------------------------------------
def test_a_prefix_of_a_flag_is_an_error_not_the_flag(tmp_path, capsys):
    code, err = cli(train_main, ["--iteration", "2", "--logdir", str(tmp_path)], capsys)
    assert code == 2 and err.startswith("error:") and "unrecognized arguments: --iteration 2" in err
    assert not any(tmp_path.iterdir())


def test_every_argparse_parser_in_the_repository_refuses_abbreviations():
    """Each ``ArgumentParser(...)`` call in steinrl/, benchmarks/, research/scripts/ and the scripts passes
    ``allow_abbrev=False`` (steinrl's ``Parser`` does so itself)."""
    missing = []
    for path in [*ROOT.glob("steinrl/**/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("research/scripts/*.py"),
                 ROOT / "train.py", ROOT / "evaluate.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == \
                    "ArgumentParser" and not any(k.arg == "allow_abbrev" for k in node.keywords):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []
    from steinrl.run.cli_base import Parser

    assert Parser(prog="x").allow_abbrev is False


def test_help_lists_every_task():
    from steinrl.bandits.tasks import BANDIT_TASKS
    from steinrl.envs import MUJOCO_NAMES, SHORT_NAMES

    text = " ".join(train_parser().format_help().split())
    for name in [*SHORT_NAMES, *MUJOCO_NAMES, *BANDIT_TASKS.names()]:
        assert re.search(rf"\b{name}\b", text), name
    assert "CartpoleSwingUpRllab" in text and "SparseHalfCheetah" in text and "Mushroom" in text


# --- progress ---------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_no_bar_in_a_pipe_a_line_every_log_every(capsys):
    trainer = steinrl.Trainer(tiny_config(env="Cartpole", iterations=5))
    stream = io.StringIO()
    progress = ProgressCallback(True, 2, "svgd Cartpole", stream=stream)
    assert fit(trainer, [progress]) == "done"
    trainer.close()
    assert progress.bar is None and "\r" not in stream.getvalue()
    lines = stream.getvalue().splitlines()
    assert [line.split()[3] for line in lines] == ["2/5", "4/5", "5/5"]  # every 2nd iteration and the last


def test_bar_total_with_total_steps_is_the_iterations_the_run_takes():
    """``--total-steps``: the iterations are an estimate (an episode's reset step is not an env
    step), 25 where the run took 26; the bar's total now follows the run and ends at its count."""
    # 480: four iterations of 3 x 2 x 20 steps, had no step been a reset
    cfg = tiny_config(env="Cartpole", total_steps=480, **{"rollout.sampling": "continuing"})
    trainer = steinrl.Trainer(cfg)
    progress = ProgressCallback(True, 10, "total steps", stream=Terminal())
    totals = []
    original = progress.on_iteration
    progress.on_iteration = lambda t, s: (original(t, s), totals.append(progress.bar.total))
    assert fit(trainer, [progress]) == "done"
    trainer.close()
    estimate = trainer.job.num_steps
    assert trainer.iteration > estimate  # the case the issue met (the estimate is short)
    assert totals[-1] == trainer.iteration and progress.bar.n == trainer.iteration
    assert all(total > i + 1 for i, total in enumerate(totals[:-1]))  # never a bar that reads past its end


def test_ctrl_c_messages_count_iterations_alike(tmp_path):
    """Ctrl-C: ``stopped after iteration N of T`` and ``interrupted: N iterations (now N of T)``
    name the same N (before: 30, then 31), the iterations in metrics.jsonl."""
    import signal

    run = tmp_path / "Cartpole" / "s2vgd-a2c" / "r"
    metrics = run / "metrics.jsonl"
    args = ["--env", "Cartpole", "--iterations", "100000", "--particles", "2", "--set", "envs_per_particle=2",
            "--set", "batch_size=32", "--set", "horizon=30", "--no-progress", "--logdir", str(tmp_path),
            "--run-name", "r"]
    code, err = signal_training(args, metrics, signal.SIGINT)
    assert code == 130, err
    stopped = re.search(r"stopped after iteration (\d+) of (\d+)", err)
    summary = re.search(r"interrupted: (\d+) iterations \(now (\d+) of (\d+)\)", err)
    assert stopped and summary, err
    rows = metrics.read_text().count("\n")
    assert int(stopped[1]) == int(summary[1]) == int(summary[2]) == rows
    assert stopped[2] == summary[3] == "100000"


# --- other messages ---------------------------------------------------------------------
def test_a_locked_resume_says_how_to_resume_not_to_rename(tmp_path, capsys):
    run = trained_run(tmp_path)
    holder = RunDirectory(run).acquire()
    try:
        code, err = cli(train_main, ["--resume", str(run), "--iterations", "5"], capsys)
    finally:
        holder.release()
    assert code == 2 and "is in use by another process" in err and "--run-name" not in err
    assert "resume it again" in err and len(err.strip().splitlines()) == 1


def test_compare_on_a_missing_path_says_so(tmp_path, capsys):
    from steinrl.run.cli import compare_main

    code, err = cli(compare_main, [str(tmp_path / "nosuch")], capsys)
    assert code == 2 and f"no run, checkpoint or folder at {tmp_path / 'nosuch'}" in err and "--out" not in err


def test_sb3_ret_is_the_100_episode_mean():
    """An iteration in which no episode ended: SB3 shows its 100-episode mean, and so does ``ret``."""
    from steinrl.baselines.sb3_ppo import SB3PPOJob

    fields = SB3PPOJob.progress_fields({"rollout/ep_rew_mean": math.nan, "rollout/ep_rew_mean_100": 812.25,
                                        "time/total_env_steps": 4096, "time/fps": 900.0})
    assert fields["ret"] == "812.2"


def test_readme_summary_line_is_the_real_one(tmp_path, capsys):
    """The README quotes the line a run ends with; this run prints one of the same form."""
    readme = (ROOT / "README.md").read_text()
    quoted = re.search(r"^done: .*$", readme, re.M)[0]
    code, err = cli(train_main, ["--env", "Cartpole", "--iterations", "2", "--particles", "2", "--set",
                                 "batch_size=32", "--set", "horizon=30", "--set", "envs_per_particle=2",
                                 "--no-progress", "--logdir", str(tmp_path), "--run-name", "demo"], capsys)
    real = next(line for line in err.splitlines() if line.startswith("done:"))
    pattern = r"done: \d+ iterations \(now \d+ of \d+\) in [\d.]+ s; final -?[\d.]+, best -?[\d.]+ " \
              r"\(rollout/ep_rew_max_particle\); [\d,]+ env steps; run \S+"
    assert code == 0 and re.fullmatch(pattern, real) and re.fullmatch(pattern, quoted), (real, quoted)
    assert Path(real.split("; run ")[1]).is_dir()


def test_readme_says_what_the_first_command_takes_and_prints():
    readme = (ROOT / "README.md").read_text()
    first = "python train.py --algo s2vgd-a2c --env CartpoleSwingUp"
    assert first in readme
    block = readme[readme.index(first):readme.index("## The command line")]
    assert re.search(r"\d+ seeds", block) and "minute" in block and "best" in block and "final" in block
    assert "--preset paper" in block and "svgd-a2c" in block.replace("s2vgd-a2c", "")
    assert "--seeds" in readme and "continuing or cut" in readme


@pytest.mark.parametrize("script, flag, words", [
    ("benchmarks/uci.py", "--splits", "minutes"),
    ("benchmarks/svgd_step.py", "--roofline", "roofline"),
])
def test_long_benchmarks_say_how_long_and_keep_the_long_part_behind_a_flag(script, flag, words):
    source = (ROOT / script).read_text()
    assert flag in source and words in source.split('"""')[1]
