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
    mine = ("Cartpole", "s2vgd-a2c policy.hidden=[8,4] update.lr=0.001")  # critic.hidden, critic.lr: sections kept
    hidden = ",".join(map(str, default.policy.hidden))
    theirs = ("Cartpole", f"s2vgd-a2c policy.hidden=[{hidden}] update.lr={default.update.lr:g}")
    assert set(drawn) == {mine, theirs}
    assert drawn[theirs]["n"] == [2, 2] and drawn[mine]["n"] == [1, 1]


def test_legends_show_only_what_differs_in_short_form_and_axes_say_what_is_plotted(tmp_path, monkeypatch):
    """An IMQ run beside a default one: the legend read ``rollout.env_backend=auto update.kernel={'name':
    'imq', 'bandwidth': 'svpg', 'beta': -0.3}``; now the differing key alone, without its section where
    that is unambiguous, a kernel as its name and the parameters off their defaults. The y axis
    read ``rollout/ep_rew_max_particle``; now it says it in words."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    runs = tmp_path / "runs"
    trained_run(runs, "svgd-a2c", run_name="rbf")
    trained_run(runs, "svgd-a2c", run_name="imq", **{"update.kernel": {"name": "imq", "beta": -0.3}})
    axes = []
    original = plt.Figure.savefig

    def spy(fig, *args, **kwargs):
        axes.extend((ax.get_ylabel(), [line.get_label() for line in ax.get_lines()]) for ax in fig.axes)
        return original(fig, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", spy)
    drawn = plot_runs([runs], tmp_path / "k.png")
    assert set(drawn) == {("Cartpole", "svgd-a2c kernel=imq(β=-0.3)"),
                          ("Cartpole", "svgd-a2c kernel=rbf")}  # the task file's kernel, at its defaults
    assert axes == [("best particle's mean return", ["svgd-a2c kernel=imq(β=-0.3) (n=1)",
                                                      "svgd-a2c kernel=rbf (n=1)"])]


def test_short_labels():
    from steinrl.run.labels import metric_label, settings_label, short_value

    assert short_value({"name": "imq", "bandwidth": "svpg", "beta": -0.5}) == "imq"  # every parameter its default
    assert short_value({"name": "rbf", "bandwidth": 0.5}) == "rbf(bandwidth=0.5)"
    assert short_value([100, 50, 25]) == "[100,50,25]" and short_value(True) == "true" and short_value(1e-3) == "0.001"
    keys = ["update.lr", "critic.lr", "update.kernel", "temperature"]
    assert settings_label({"update.lr": 0.001, "update.kernel": "imq", "temperature": 3.0}, keys) == \
        "update.lr=0.001 kernel=imq α=3"
    assert metric_label("rollout/ep_rew_mean") == "mean episode return" and metric_label("my/key") == "my/key"


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


# --- figures that read at page width (issue 41) ------------------------------------------
#: The widest a figure may be: three panels and their labels (a page is about 1000 px at 100 %).
MAX_WIDTH = 1600


def load_script(name):
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readable(drawn, panels):
    """At most 3 panels a row, as wide as the page allows, the legend clear of every axes."""
    assert drawn.columns == min(3, panels) and drawn.rows == -(-panels // 3)
    assert 300 < drawn.size[0] <= MAX_WIDTH and drawn.size[1] > 200
    assert drawn.legend_outside


def test_bands_only_from_3_seeds_and_within_the_seeds_range():
    x = np.arange(4.0)
    two = Curve("a (n=2)", x, np.ones(4), np.full(4, -5.0), np.full(4, 5.0), n=2)
    assert two.band() is None  # a 95 % interval of two seeds: not drawn
    three = Curve("b", x, np.ones(4), np.full(4, -5.0), np.full(4, 5.0), n=[2, 3, 3, 3],
                  data_low=[0.0, 0.5, 0.5, 0.5], data_high=[2.0, 3.0, 9.0, 3.0])
    low, high = three.band()
    assert np.isnan(low[0]) and np.isnan(high[0])  # a point that fewer seeds reached: a gap
    assert low[1:].tolist() == [0.5, 0.5, 0.5] and high[1:].tolist() == [3.0, 5.0, 3.0]  # clipped to the data
    assert Curve("c", x, np.ones(4)).band() is None  # no band given: none drawn


def test_draw_panels_wraps_rows_of_three_legend_below_integer_ticks(tmp_path):
    panels = [Panel(f"task {i}", "iteration", "return",
                    [Curve(f"algo{j} (n={n})", np.arange(7.0), np.arange(7.0) * (j + 1), np.arange(7.0) - 1,
                           np.arange(7.0) + 1, n=n) for j, n in enumerate((2, 5))]) for i in range(4)]
    drawn = draw_panels(panels, tmp_path / "f.png", band="mean ± std")
    readable(drawn, 4)
    assert all(t == int(t) for ticks in drawn.xticks for t in ticks)  # no 0.5 iterations
    assert draw_panels(panels[:1], tmp_path / "one.png", band="b").size[0] <= 700  # one panel: half a page


def test_sweep_curves_start_at_iteration_0_like_evaluate_plot(tmp_path, monkeypatch):
    """results.csv counts Ray's results from 1; the figure draws the trainer's iteration, from 0."""
    import steinrl.run.plotting as plotting
    from steinrl.run.sweep_report import TrialRun, plot_curves

    seen = []
    monkeypatch.setattr(plotting, "draw_panels", lambda panels, *a, **k: seen.extend(panels) or draw(panels, *a, **k))
    draw = draw_panels
    trials = [TrialRun(f"t{s}", "svgd-a2c", "Cartpole", s, {}, "rollout/ep_rew_max_particle", "iteration",
                       [{"iteration": i, "rollout/ep_rew_max_particle": float(10 * i + s)} for i in range(1, 6)], 1.0)
              for s in range(2)]
    drawn = plot_curves(trials, tmp_path / "curves.png")
    readable(drawn, 1)
    curve = seen[0].curves[0]
    assert list(curve.x) == [0, 1, 2, 3, 4] and curve.n == 2 and curve.band() is None  # n = 2: no band below 0


def test_evaluate_plot_figure_reads_at_page_width(tmp_path, monkeypatch):
    import steinrl.run.plotting as plotting

    runs = tmp_path / "runs"
    trained_run(runs, run_name="a", seed=0)
    results = []
    original = plotting.draw_panels
    monkeypatch.setattr(plotting, "draw_panels", lambda *a, **k: results.append(original(*a, **k)))
    plot_runs([runs], tmp_path / "c.png")
    readable(results[0], 1)


def test_bandit_and_docs_figures_read_at_page_width(tmp_path):
    bandits = load_script("bandits")
    rounds = [10.0, 20.0, 30.0]
    results = {(d, a): [{"curve": [s + k * (i + 1) for i in range(3)], "rounds": rounds, "seed": s}
                        for s in range(3)] for d in (0.5, 0.7, 0.9, 0.95) for k, a in enumerate(("svgd-ts", "greedy"))}
    header = {"env": "Wheel", "protocol": "showdown", "seeds": "0,1,2"}
    drawn = bandits.plot_curves(tmp_path / "w.png", header, ["svgd-ts", "greedy"], [0.5, 0.7, 0.9, 0.95], results)
    readable(drawn, 4)  # the 5-delta Wheel figure was 3520 px wide in one row

    figures = load_script("docs_figures")
    source = tmp_path / "learning.json"
    runs = {"svgd-a2c": {"seeds": [0, 1, 2], "curve": [1.0, 2.0, 4.0]},
            "s2vgd-a2c": {"seeds": [0, 1, 2], "curve": [1.0, 3.0, 3.5]}}
    source.write_text(json.dumps({"paper": {"Cartpole": runs}}))
    readable(figures.learning_figure(tmp_path / "cartpole.png", source), 1)


def test_every_docs_figure_has_its_source_or_a_reason():
    """benchmarks/docs_figures.py re-makes every figure in docs/ and research/ from archived data; one whose data
    is not in the repository is named with the reason, never left unaccounted for."""
    figures = load_script("docs_figures")
    found = figures.figures()
    assert len(found) >= 30
    for png, (source, remake) in found.items():
        assert remake is not None or png.name in figures.NOT_ARCHIVED, (png, source)
