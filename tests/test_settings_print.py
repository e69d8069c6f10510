"""A run says what took effect: at its start, the settings that differ from the defaults of its
algorithm on its task (the kernel and its parameters in short form); not with --no-progress."""

from __future__ import annotations

from steinrl.run.cli import run_cli, train_main

TINY = ["--algo", "svgd-a2c", "--env", "Cartpole", "--particles", "3", "--iterations", "1", "--set",
        "rollout.batch_size=40", "--set", "rollout.envs_per_particle=2", "--set", "critic.steps=2", "--set",
        "run.tensorboard=false"]


def _settings(err: str) -> list[str]:
    """The settings block's lines, its continuation lines (wrapped at 120 columns) joined to it."""
    lines = err.splitlines()
    first = [i for i, line in enumerate(lines) if line.startswith("settings beyond the defaults")]
    if not first:
        return []
    block = [lines[first[0]]]
    for line in lines[first[0] + 1:]:
        if not line.startswith("  "):
            break
        block.append(line.strip())
    assert all(len(line) <= 120 for line in block)
    return [" ".join(block)]


def test_a_run_prints_its_settings_beyond_the_defaults(tmp_path, capsys):
    assert run_cli(train_main, [*TINY, "--logdir", str(tmp_path), "--temperature", "3", "--set",
                                "update.kernel={name: imq, beta: -0.3}"]) == 0
    (line,) = _settings(capsys.readouterr().err)
    assert line == ("settings beyond the defaults of svgd-a2c on Cartpole: particles=3 iterations=1 α=3 "
                    "batch_size=40 envs_per_particle=2 kernel=imq(β=-0.3) steps=2")


def test_only_what_differs_and_not_with_no_progress(tmp_path, capsys):
    """Cartpole's own 100 iterations (configs/Cartpole.yaml) are its defaults: not shown."""
    assert run_cli(train_main, ["--algo", "svgd-a2c", "--env", "Cartpole", "--iterations", "100",
                                "--max-seconds", "0.001", "--logdir", str(tmp_path / "a"), "--set",
                                "run.tensorboard=false"]) == 0
    assert _settings(capsys.readouterr().err) == ["settings beyond the defaults of svgd-a2c on Cartpole: "
                                                  "max_seconds=0.001"]
    assert run_cli(train_main, [*TINY, "--logdir", str(tmp_path / "b"), "--no-progress"]) == 0
    assert _settings(capsys.readouterr().err) == []


def test_a_seed_batch_shows_what_the_batch_pinned(tmp_path, capsys):
    assert run_cli(train_main, [*TINY, "--logdir", str(tmp_path), "--seeds", "0,1", "--set",
                                "rollout.sampling=continuing"]) == 0
    (line,) = _settings(capsys.readouterr().err)
    assert "env_backend=torch" in line and "sampling=continuing" in line and "seed=" not in line
