"""Every front door as solid as ``train``: ``steinrl evaluate``, ``steinrl sweep``, the bandit
data path (``task.path``), ``benchmarks/uci.py`` and ``benchmarks/bandits.py`` answer every
bad argument or data file with one line ``error: ...`` naming the problem, exit 2, no
traceback and nothing written. One test per class of bad input: missing, wrong kind,
unreadable (not text), empty, non-numeric, non-finite (named by file, line and column),
out-of-range counts."""

from __future__ import annotations

import runpy

import pytest
from conftest import ROOT, run_script, trained_run

from steinrl.run.cli import evaluate_main, run_cli, steinrl_main, train_main

BINARY = bytes(range(128, 256)) * 4  # not UTF-8


def files_under(path):
    return sorted(p.relative_to(path) for p in path.rglob("*"))


def make(path, content):
    """``path`` as a bad input: None absent, "DIR" a directory, else a file holding ``content``."""
    if content == "DIR":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def one_line_exit_2(main, args, capsys, *words):
    """Run ``main(args)`` through the CLI wrapper: exit 2, one ``error:`` line holding ``words``."""
    capsys.readouterr()
    code = run_cli(main, args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return trained_run(tmp_path_factory.mktemp("runs"))


# --- steinrl evaluate ---------------------------------------------------------------------
@pytest.mark.parametrize("extra, words", [
    (["--episodes", "0"], ["--episodes", "[1, "]),
    (["--seed", "-1"], ["--seed", "[0, 2**32)"]),
    (["--plot-only"], ["--plot-only needs --plot"]),
    (["--plot", "{tmp}"], ["is a directory"]),  # wrong kind
    (["--plot", "{tmp}/curves.txt"], ["must end in .png"]),
    (["--plot", "{tmp}/afile/curves.png"], ["afile is a file, not a directory"]),
    (["--json", "{tmp}/afile/x.json"], ["afile is a file, not a directory"]),
    (["--video", "{tmp}/episode.txt"], ["must end in .gif"]),
])
def test_evaluate_bad_arguments(rl_run, tmp_path, capsys, extra, words):
    (tmp_path / "afile").write_text("x")
    before, run_before = files_under(tmp_path), files_under(rl_run)
    one_line_exit_2(evaluate_main, [str(rl_run), *(a.format(tmp=tmp_path) for a in extra)], capsys, *words)
    assert files_under(tmp_path) == before and files_under(rl_run) == run_before


def test_evaluate_a_folder_that_is_not_a_run_says_so(rl_run, capsys):
    folder = rl_run.parent.parent  # <logdir>/Cartpole: runs below it, none in it
    one_line_exit_2(evaluate_main, [str(folder)], capsys, "is not a run directory", "--plot-only")


def test_evaluate_writes_nothing_when_a_later_run_is_bad(rl_run, tmp_path, capsys):
    png = tmp_path / "c.png"
    one_line_exit_2(evaluate_main, [str(rl_run), str(tmp_path / "missing"), "--plot", str(png)], capsys,
                    "no run directory or checkpoint")
    assert not png.exists() and not (rl_run / "evaluation.json").exists()


# --- steinrl sweep ------------------------------------------------------------------------
GOOD_SPEC = "algos: [svgd-a2c]\nenvs: [Cartpole]\nseeds: 1\niterations: 1\n"


@pytest.mark.parametrize("content, words", [
    (None, ["no such file"]),  # missing
    ("DIR", ["is a directory"]),  # wrong kind
    (BINARY, ["not UTF-8"]),  # unreadable as text
    ("", ["is empty"]),
    ("- a\n- b\n", ["must hold a mapping"]),
    ("algos: [svgd-a2c]\nenvs: [Cartpole]\nseeds: 0\n", ["seeds", "count N >= 1"]),  # out-of-range count
    ("algos: [svgd-a2c]\nenvs: [Cartpole]\nseeds: 1\niterations: 0\n", ["iterations", ">= 1"]),
])
def test_sweep_bad_spec_files(tmp_path, capsys, content, words):
    pytest.importorskip("ray.tune")
    spec = tmp_path / "spec.yaml"
    make(spec, content)
    before = files_under(tmp_path)
    one_line_exit_2(steinrl_main, ["sweep", str(spec), "--out", str(tmp_path / "out")], capsys, *words)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("out, words", [("afile", ["afile is a file, not a directory"]),
                                        ("afile/below", ["afile is a file, not a directory"])])
def test_sweep_out_of_the_wrong_kind(tmp_path, capsys, out, words):
    pytest.importorskip("ray.tune")
    (tmp_path / "spec.yaml").write_text(GOOD_SPEC)
    (tmp_path / "afile").write_text("x")
    before = files_under(tmp_path)
    one_line_exit_2(steinrl_main, ["sweep", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / out)], capsys,
                    "--out", *words)
    assert files_under(tmp_path) == before


# --- the bandit data path (task.path of the Classification bandit) ------------------------
@pytest.mark.parametrize("content, words", [
    (None, ["no such file"]),
    ("DIR", ["is a directory"]),
    (BINARY, ["not UTF-8"]),
    ("", ["is empty"]),
    ("a,b,y\n1,2,0\n3,red,1\n", ["line 3", "'b'", "not numeric", "'red'"]),
    ("a,b,y\n1,2,0\n3,4,1\n5,nan,0\n", ["line 4", "'b'", "'nan'", "not a finite number"]),
    ("a,b,y\n1,2,0\n3,inf,1\n", ["line 3", "'b'", "'inf'", "not a finite number"]),
    ("a,b,y\n1,2,0\n3,4,\n5,6,1\n", ["line 3", "'y'", "missing class"]),
])
def test_bandit_data_files(tmp_path, capsys, content, words):
    data = tmp_path / "data.csv"
    make(data, content)
    logdir = tmp_path / "runs"
    err = one_line_exit_2(train_main, ["--algo", "greedy", "--env", "Classification", "--set", f"task.path={data}",
                                       "--rounds", "20", "--logdir", str(logdir), "--no-progress"], capsys, *words)
    assert str(data) in err and not logdir.exists()


def test_bandit_rounds_beyond_the_data_without_replacement(tmp_path, capsys):
    data = tmp_path / "data.csv"
    data.write_text("a,y\n" + "".join(f"{i},{i % 2}\n" for i in range(10)))
    one_line_exit_2(train_main, ["--algo", "greedy", "--env", "Classification", "--set", f"task.path={data}",
                                 "--set", "task.replace=false", "--rounds", "11", "--logdir", str(tmp_path / "runs"),
                                 "--no-progress"], capsys, "only 10 rows, asked for 11")
    assert not (tmp_path / "runs").exists()


def test_a_bandit_without_replacement_plays_each_row_at_most_once():
    """One pass over the data, also past the job's 1000-round blocks (before: each block was its
    own permutation, so rows came back, and fewer than 1000 rows could not be played at all)."""
    import numpy as np

    from steinrl.bandits.job import draw_stream
    from steinrl.bandits.tasks import Classification

    features = np.arange(1500, dtype=float)[:, None]  # row i holds the value i: its identity
    task = Classification(features, np.arange(1500) % 3, replace=False)
    stream = draw_stream(task, 1200, seed=4)
    rows = np.round(stream.contexts[:, 0] * features.std() + features.mean()).astype(int)
    assert len(rows) == 1200 and len(set(rows.tolist())) == 1200
    assert np.array_equal(draw_stream(task, 700, seed=4).contexts, stream.contexts[:700])  # a resume's prefix
    small = Classification(features[:10], np.arange(10) % 2, replace=False)
    assert sorted(np.round(draw_stream(small, 10, 0).contexts[:, 0] * features[:10].std() + 4.5).astype(int)) == \
        list(range(10))


# --- benchmarks/uci.py --------------------------------------------------------------------
@pytest.fixture(scope="module")
def uci():
    return runpy.run_path(str(ROOT / "benchmarks" / "uci.py"), run_name="uci")


def uci_set(root, data="1 2 3\n4 5 6\n7 8 9\n"):
    """A UCI set in the protocol's format: ``data`` (text or bytes), features 0 and 1, target 2."""
    root.mkdir()
    for name, text in (("index_features", "0 1\n"), ("index_target", "2\n"), ("n_splits", "2\n")):
        (root / f"{name}.txt").write_text(text)
    (root / "data.txt").write_bytes(data if isinstance(data, bytes) else data.encode())
    return root


def _file(tmp_path):
    (tmp_path / "f.txt").write_text("1")
    return tmp_path / "f.txt"


def _set_without_n_splits(tmp_path):
    (uci_set(tmp_path / "s") / "n_splits.txt").unlink()
    return tmp_path / "s"


@pytest.mark.parametrize("data, args, words", [
    ("1 2 3\n4 nan 6\n7 8 9\n", [], ["data.txt: line 2, column 2", "'nan'", "not a finite number"]),
    ("1 2 3\n4 5 6\n7 8 -inf\n", [], ["data.txt: line 3, column 3", "'-inf'"]),
    ("1 2 3\n4 x 6\n", [], ["data.txt: line 2, column 2: 'x' is not a number"]),
    ("1 2 3\n4 5\n", [], ["line 2 has 2 values, line 1 has 3"]),
    ("", [], ["data.txt is empty"]),
    (BINARY, [], ["data.txt is not UTF-8 text"]),
    ("1 2 3\n4 5 6\n7 8 9\n", ["--particles", "0"], ["--particles must be >= 1"]),
    ("1 2 3\n4 5 6\n7 8 9\n", ["--batch-size", "0"], ["--batch-size must be >= 1"]),
    ("1 2 3\n4 5 6\n7 8 9\n", ["--splits", "0"], ["--splits must be >= 1"]),
    ("1 2 3\n4 5 6\n7 8 9\n", ["--lr", "nan"], ["--lr must be a finite number > 0"]),
    ("1 2 3\n4 5 6\n7 8 9\n", ["--methods", "svgd,nope"], ["unknown method(s) ['nope']"]),
])
def test_uci_bad_data_and_arguments(uci, tmp_path, capsys, data, args, words):
    root = uci_set(tmp_path / "set", data)
    out = tmp_path / "out"
    one_line_exit_2(uci["main"], ["--data", str(root), "--out", str(out), *args], capsys, *words)
    assert not out.exists()


@pytest.mark.parametrize("make, words", [
    (lambda t: t / "absent", ["no such directory"]),
    (_file, ["is a file; give a directory"]),
    (_set_without_n_splits, ["lacks n_splits.txt"]),
])
def test_uci_data_directory_of_the_wrong_kind(uci, tmp_path, capsys, make, words):
    one_line_exit_2(uci["main"], ["--data", str(make(tmp_path)), "--out", str(tmp_path / "out")], capsys, *words)
    assert not (tmp_path / "out").exists()


def test_uci_writes_to_out_and_leaves_the_results_page_alone(tmp_path):
    results = ROOT / "research" / "results" / "uci.md"
    before = results.read_text()
    root = uci_set(tmp_path / "tiny", "".join(f"{i} {i % 3} {2 * i}\n" for i in range(20)))
    out = tmp_path / "out"
    proc = run_script("benchmarks/uci.py", "--data", str(root), "--splits", "1", "--epochs", "1", "--methods", "svgd",
                      "--jobs", "1", "--particles", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    table = (out / "uci_tiny.md").read_text()
    assert "## UCI regression: tiny" in table and "| svgd | joint | 1 | 1 |" in table
    assert "--out" not in table  # the recorded command is the one that reproduces the numbers
    assert results.read_text() == before


# --- benchmarks/bandits.py ----------------------------------------------------------------
@pytest.fixture(scope="module")
def bandits():
    return runpy.run_path(str(ROOT / "benchmarks" / "bandits.py"), run_name="bandits")


@pytest.mark.parametrize("args, words", [
    (["--seeds", ""], ["--seeds", "integers"]),
    (["--seeds", "0,0"], ["--seeds", "distinct"]),
    (["--seeds", "-1"], ["--seeds", "[0, 2**32)"]),
    (["--rounds", "0"], ["--rounds must be >= 1"]),
    (["--jobs", "0"], ["--jobs must be >= 1"]),
    (["--protocol", "nope"], ["--protocol 'nope'", "showdown"]),
    (["--agents", "greedy,nope"], ["unknown algo 'nope'"]),
    (["--agents", "egreedy:epsilon"], ["'egreedy:epsilon' is not name[:key=value,...]"]),
    (["--agents", "egreedy:agent.epsilon=7"], ["agent.epsilon"]),
    (["--env", "Cartpole", "--agents", "greedy"], ["Cartpole"]),
    (["--env", "Wheel", "--agents", "greedy", "--delta", "1.5"], ["delta"]),
    (["--from", "{tmp}/none.csv.gz"], ["--from", "no such file"]),
    (["--from", "{tmp}/afile"], ["--from", "not a gzip CSV"]),
    (["--out", "{tmp}/afile"], ["--out", "afile is a file, not a directory"]),
])
def test_bandits_benchmark_bad_arguments(bandits, tmp_path, capsys, args, words):
    (tmp_path / "afile").write_text("x")
    args = [a.format(tmp=tmp_path) for a in args]
    out = [] if "--out" in args else ["--out", str(tmp_path / "out")]
    one_line_exit_2(bandits["main"], [*args, *out], capsys, *words)
    assert files_under(tmp_path) == [type(tmp_path)("afile")]


def test_the_recorded_commands_leave_out_where_the_files_go(uci, bandits):
    """--out and --update-results (which copies the table to research/results/) change no number."""
    argv = ["--seeds", "0,1", "--update-results", "--out", "/tmp/x", "--out=/tmp/y"]
    assert uci["_command"](argv) == "python benchmarks/uci.py --seeds 0,1"
    assert bandits["_command"](argv) == "python benchmarks/bandits.py --seeds 0,1"
    assert bandits["RESULTS"] == ROOT / "research" / "results"


# --- benchmarks/combine_sweeps.py ---------------------------------------------------------
@pytest.mark.parametrize("content, words", [
    ("x,y\n1,2\n", ["is not a steinrl sweep results.csv"]),
    (BINARY, ["cannot read"]),
])
def test_combine_sweeps_bad_results_files(tmp_path, capsys, content, words):
    combine = runpy.run_path(str(ROOT / "benchmarks" / "combine_sweeps.py"), run_name="combine")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "results.csv").write_bytes(content if isinstance(content, bytes) else content.encode())
    one_line_exit_2(combine["main"], [str(tmp_path / "src"), "--out", str(tmp_path / "out")], capsys, *words)
    assert not (tmp_path / "out").exists()
