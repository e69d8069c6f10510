"""Figures people can read, and ``evaluate`` on every kind of run: runs are grouped by
algorithm *and* resolved config, each group labelled by what differs; every curve has its own
colour and line style; a curve that dwarfs the rest gets its own panel; a bandit run (a job
without a policy) is scored by its logged metrics."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import tiny_config, trained_run

from steinrl.run.cli import evaluate_main, run_cli
from steinrl.run.plotting import Curve, Panel, _styles, draw_panels, plot_runs, split_off_scale


def curve(label, top):
    x = np.arange(5.0)
    mean = top * x / 4
    return Curve(label, x, mean, mean - 1, mean + 1)


def test_split_off_scale_by_hand():
    # scales (largest |mean|) 10, 12, 11, 100: median 11.5; only 100 > 4 * 11.5 is off the scale
    on, off = split_off_scale([curve("a", 10), curve("b", 12), curve("c", 11), curve("uniform", 100)])
    assert [c.label for c in on] == ["a", "b", "c"] and [c.label for c in off] == ["uniform"]
    assert split_off_scale([curve("a", 10), curve("b", 100)])[1] == []  # two curves: nothing is moved
    assert split_off_scale([curve("a", 10), curve("b", 44), curve("c", 46)])[1] == []  # 46 < 4 * 44 (the median)
    # more than half would be "off": no split (a scale with two clusters is not an outlier)
    assert split_off_scale([curve("a", 1), curve("b", 100), curve("c", 100), curve("d", 100)])[1] == []


def test_every_curve_has_its_own_colour_and_line_style():
    labels = [f"agent{i}" for i in range(17)]  # the Mushroom showdown's 17 agents
    styles = _styles(labels)
    pairs = {(tuple(s["color"]), s["linestyle"]) for s in styles.values()}
    assert len(pairs) == 17
    assert all(styles[a]["linestyle"] != styles[b]["linestyle"] and styles[a]["color"] != styles[b]["color"]
               for a, b in zip(labels, labels[1:]))  # neighbours in the legend differ in both


def test_draw_panels_gives_an_off_scale_curve_its_own_panel(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    drawn = []
    original = plt.Figure.savefig

    def spy(fig, *args, **kwargs):
        drawn.append([(ax.get_title(), [line.get_label() for line in ax.get_lines()]) for ax in fig.axes])
        return original(fig, *args, **kwargs)

    plt.Figure.savefig = spy
    try:
        draw_panels([Panel("Mushroom", "round", "cumulative regret",
                           [curve("svgd-ts", 10), curve("greedy", 12), curve("linfullpost", 11),
                            curve("uniform", 100)])], tmp_path / "f.png", band="mean ± s.e.")
    finally:
        plt.Figure.savefig = original
    assert drawn == [[("Mushroom", ["svgd-ts", "greedy", "linfullpost"]),
                      ("Mushroom: off the left panel's scale", ["uniform"])]]
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_groups_runs_by_config_and_labels_what_differs(tmp_path, capsys):
    """A run with --set update.lr=1e-3 policy.hidden=[8,4] is its own group (before: merged into
    the default runs' band, with a warning that read as if it were a duplicate copy)."""
    runs = tmp_path / "runs"
    trained_run(runs, run_name="a", seed=0)
    trained_run(runs, run_name="b", seed=1)
    trained_run(runs, run_name="c", seed=0, **{"update.lr": 1e-3, "policy.hidden": [8, 4]})
    default = tiny_config(env="Cartpole")
    capsys.readouterr()
    drawn = plot_runs([runs], tmp_path / "c.png")
    assert "more than one run directory" not in capsys.readouterr().err
    mine = ("Cartpole", "s2vgd-a2c policy.hidden=[8, 4] update.lr=0.001")
    theirs = ("Cartpole", f"s2vgd-a2c policy.hidden={list(default.policy.hidden)} update.lr={default.update.lr:g}")
    assert set(drawn) == {mine, theirs}
    assert drawn[theirs]["n"] == [2, 2] and drawn[mine]["n"] == [1, 1]


@pytest.fixture(scope="module")
def bandit_run(tmp_path_factory):
    from steinrl.run.cli import train
    from steinrl.run.config import load_config

    root = tmp_path_factory.mktemp("bandit")
    return train(load_config("greedy", "Wheel", {"rounds": 100, "protocol.refit_every": 25, "run.logdir": str(root),
                                                 "run.run_name": "r", "run.progress": False,
                                                 "run.tensorboard": False}))


def test_evaluate_scores_a_bandit_run_by_its_logged_metrics(bandit_run, capsys):
    from steinrl.run.load import load_run
    from steinrl.run.logger import read_metrics

    cfg, policy, _ = load_run(bandit_run)
    assert policy is None and cfg.algo == "greedy"
    capsys.readouterr()
    assert run_cli(evaluate_main, [str(bandit_run)]) == 0
    out = capsys.readouterr().out
    last = read_metrics(bandit_run)[-1]
    assert f"regret {last['bandit/cumulative_regret']:.1f} after 100 rounds" in out
    result = json.loads((bandit_run / "evaluation.json").read_text())
    assert result["algo"] == "greedy" and result["bandit/rounds"] == 100
    assert result["bandit/cumulative_regret"] == last["bandit/cumulative_regret"]


def test_evaluate_video_of_a_bandit_run_is_a_one_line_error(bandit_run, tmp_path, capsys):
    capsys.readouterr()
    assert run_cli(evaluate_main, [str(bandit_run), "--video", str(tmp_path / "v.gif")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--video needs a run with a policy" in err
    assert not (tmp_path / "v.gif").exists()


def test_load_run_loads_the_trained_policy(tmp_path):
    import torch

    from steinrl.run.checkpoint import load_checkpoint
    from steinrl.run.load import load_run

    run = trained_run(tmp_path)
    _, policy, _ = load_run(run)
    saved = load_checkpoint(run)["job"]["agent"]["policy"]
    assert not policy.training and set(policy.state_dict()) == set(saved)
    assert all(torch.equal(policy.state_dict()[k], saved[k]) for k in saved)
