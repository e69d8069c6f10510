"""No silent overwrites: ``evaluate`` keeps a larger evaluation than the one it makes (a short one
for a video) and says what it replaces; ``compare`` says which table it replaces."""

from __future__ import annotations

import json

import pytest
from conftest import trained_run

from steinrl.run.cli import evaluate_main, run_cli, steinrl_main


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return trained_run(tmp_path_factory.mktemp("runs"), "svgd-a2c", "Cartpole")


def _evaluate(run, capsys, *args):
    assert run_cli(evaluate_main, [str(run), *args]) == 0
    return capsys.readouterr().out


def _episodes(path):
    return json.loads(path.read_text())["episodes_per_row"]


def test_a_short_evaluation_for_a_video_keeps_the_larger_one(run, tmp_path, capsys):
    """A 10-episode evaluation.json used to be replaced by the 2-episode one made for a video."""
    scores = run / "evaluation.json"
    out = _evaluate(run, capsys, "--episodes", "3")
    assert f"wrote {scores}" in out and "replaced" not in out and _episodes(scores) == 3
    gif = tmp_path / "ep.gif"
    out = _evaluate(run, capsys, "--episodes", "1", "--video", str(gif))
    beside = run / "evaluation-1ep.json"
    assert f"kept {scores} (3 episodes per policy, seed 0, deterministic, written " in out
    assert f"wrote {beside}" in out and f"wrote {gif}" in out
    assert _episodes(scores) == 3 and _episodes(beside) == 1
    # as many episodes or more: replaced, saying what was there
    out = _evaluate(run, capsys, "--episodes", "3", "--seed", "5")
    assert f"replaced {scores} (3 episodes per policy, seed 0, deterministic, written " in out
    assert json.loads(scores.read_text())["seed"] == 5


def test_compare_says_which_table_it_replaces(run, tmp_path, capsys):
    out = tmp_path / "cmp.csv"
    args = ["compare", str(run), "--episodes", "1", "--heldout-episodes", "1", "--out", str(out)]
    assert run_cli(steinrl_main, args) == 0
    err = capsys.readouterr().err
    assert f"wrote {out} and {out.with_suffix('.md')}" in err and "replaced" not in err
    assert run_cli(steinrl_main, args) == 0
    err = capsys.readouterr().err
    assert f"replaced {out} and {out.with_suffix('.md')} (2 rows, written " in err


def test_compare_splits_runs_whose_settings_differ_and_explains_its_columns(tmp_path, capsys):
    """A function-space run and an IMQ run of seed 0 (plain run directories, no sweep) became one
    row "seeds 2" with empty params; now each is its own row, named by the settings that differ,
    and the terminal and comparison.md say what the columns mean."""
    from steinrl.run.compare import compare_runs, summary_table

    root = tmp_path / "runs"
    trained_run(root, "svgd-a2c", "Cartpole", run_name="functions", **{"update.kernel": {"space": "functions"}})
    trained_run(root, "svgd-a2c", "Cartpole", run_name="imq", **{"update.kernel": {"name": "imq", "beta": -0.3}})
    trained_run(root, "svgd-a2c", "Cartpole", run_name="imq1", seed=1,
                **{"update.kernel": {"name": "imq", "beta": -0.3}})
    rows = compare_runs([root], episodes=1, heldout_episodes=1)
    params = {r["run"].rsplit("/", 1)[-1]: r["params"] for r in rows}
    assert params["functions"] == "update.kernel=rbf(space=functions)"
    assert params["imq"] == params["imq1"] == "update.kernel=imq(β=-0.3)"
    table = summary_table(rows)
    assert table.count("| Cartpole | svgd-a2c | 3 | update.kernel=imq(β=-0.3) | ") == 2
    assert table.count("| Cartpole | svgd-a2c | 3 | update.kernel=rbf(space=functions) | ") == 2
    out = tmp_path / "cmp.csv"
    assert run_cli(steinrl_main, ["compare", str(root), "--episodes", "1", "--heldout-episodes", "1",
                                  "--out", str(out)]) == 0
    terminal = capsys.readouterr().out
    for text in (terminal, out.with_suffix(".md").read_text()):
        assert "Columns:" in text and "- policy: `best-train` is the run's particle" in text
        assert "`ensemble-select` the particle best on a short held-out evaluation" in text
        assert "- better SB3 PPO: the higher seed mean" in text and "reward threshold: the runs whose" in text
