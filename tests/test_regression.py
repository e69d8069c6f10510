"""BNN regression (steinrl.bayes.regression, benchmarks/uci.py) against independent references."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from conftest import ROOT, run_script
from scipy.special import logsumexp
from scipy.stats import norm

from steinrl.bayes.regression import (
    PARTICLE_METHODS,
    REGRESSION_METHODS,
    Standardizer,
    fit_regressor,
    load_uci,
    split_indices,
)
from steinrl.errors import ConfigError


def _linear_problem(n=400, d=3, noise=0.5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 3.0, 0.5] + [0.0, 2.0, -1.0]
    w = np.array([1.5, -0.7, 2.0])
    return X, X @ w + 4.0 + noise * rng.normal(size=n), noise


def _uci_module():
    spec = importlib.util.spec_from_file_location("uci_bench", ROOT / "benchmarks" / "uci.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_linear_gaussian_matches_closed_form_posterior_and_noise():
    """A linear particle model (no hidden layer) on y = Xw + c + N(0, 0.5²): the particles'
    mean prediction is the exact Bayesian linear-regression posterior mean (numpy closed form
    in the standardised space, true noise precision, prior precision 1), and the learned noise
    variance is the truth."""
    X, y, noise = _linear_problem()
    reg = fit_regressor("svgd", X[:300], y[:300], hidden=(), epochs=300, lr=3e-3, seed=0)
    xs, ys = Standardizer.fit(X[:300]), Standardizer.fit(y[:300])
    A = np.hstack([xs.transform(X[:300]), np.ones((300, 1))])
    beta = (ys.std / noise) ** 2  # true noise precision on the standardised scale
    mean_w = beta * np.linalg.solve(np.eye(4) + beta * A.T @ A, A.T @ ys.transform(y[:300]))
    A_test = np.hstack([xs.transform(X[300:]), np.ones((100, 1))])
    exact = ys.inverse(A_test @ mean_w)
    mean, var = reg.predict(X[300:])
    # posterior std of the mean function here is ~0.12 noise units; 20 particles' Monte Carlo
    # error ~0.03 (measured max deviation 0.045); predicting ȳ instead would be off by ~9 noise units
    assert np.max(np.abs(mean - exact)) < 0.1 * noise
    noise_var = ys.std ** 2 / reg.noise_precision()
    assert abs(np.sqrt(np.median(noise_var)) / noise - 1.0) < 0.1
    assert np.all(var >= noise_var.mean() * 0.999)


def test_standardizer_round_trips_and_keeps_constant_columns():
    rng = np.random.default_rng(1)
    X = np.hstack([rng.normal(5.0, 3.0, size=(50, 2)), np.full((50, 1), 7.0)])
    s = Standardizer.fit(X)
    Z = s.transform(X)
    np.testing.assert_allclose(s.inverse(Z), X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Z[:, :2].mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z[:, :2].std(0), 1.0, atol=1e-12)
    assert s.std[2] == 1.0 and np.all(Z[:, 2] == 0.0)


def test_metrics_on_the_original_scale():
    """RMSE and test log-likelihood by hand (scipy) from the draws; an affine change of the
    target units scales the RMSE exactly and shifts the log-likelihood by −log(scale)."""
    X, y, _ = _linear_problem(n=120, seed=2)
    reg = fit_regressor("vmg", X[:100], y[:100], hidden=(8,), particles=5, epochs=5, seed=3)
    f, noise = reg.predict_samples(X[100:])
    assert f.shape == (5, 20) and noise.shape == (5,)
    hand_rmse = np.sqrt(np.mean((f.mean(0) - y[100:]) ** 2))
    assert reg.rmse(X[100:], y[100:]) == pytest.approx(hand_rmse, rel=1e-12)
    log_p = norm.logpdf(y[100:], loc=f, scale=np.sqrt(noise)[:, None])  # S n
    hand_ll = np.mean(logsumexp(log_p, axis=0) - np.log(5))
    assert reg.test_log_likelihood(X[100:], y[100:]) == pytest.approx(hand_ll, rel=1e-10)
    scaled = fit_regressor("vmg", X[:100], 1000.0 * y[:100] - 3.0, hidden=(8,), particles=5, epochs=5, seed=3)
    assert scaled.rmse(X[100:], 1000.0 * y[100:] - 3.0) == pytest.approx(1000.0 * hand_rmse, rel=1e-4)
    assert scaled.test_log_likelihood(X[100:], 1000.0 * y[100:] - 3.0) == pytest.approx(
        hand_ll - np.log(1000.0), abs=1e-3)


@pytest.mark.parametrize("method", REGRESSION_METHODS)
def test_every_method_fits_and_predicts(method):
    X, y, _ = _linear_problem(n=60, seed=4)
    reg = fit_regressor(method, X[:50], y[:50], hidden=(6,), particles=4, epochs=2, seed=0, n_predict=7)
    mean, var = reg.predict(X[50:])
    assert mean.shape == var.shape == (10,)
    assert np.all(np.isfinite(mean)) and np.all(var > 0)
    assert np.isfinite(reg.test_log_likelihood(X[50:], y[50:]))
    again = fit_regressor(method, X[:50], y[:50], hidden=(6,), particles=4, epochs=2, seed=0, n_predict=7)
    np.testing.assert_array_equal(again.predict(X[50:])[0], mean)  # deterministic given the seed


@pytest.mark.parametrize("method", REGRESSION_METHODS)
def test_every_method_learns_a_nonlinear_function(method):
    """y = sin(2 x₁) + x₂²/2 + N(0, 0.1²) on [−2, 2]²: every method's test RMSE is well below
    both the training mean's and the least-squares linear fit's (numpy), which cannot follow
    the curvature (both ≈ 0.83); a particle method's is near the noise floor, the RMSE of the
    true function itself. Seed 0, 200 epochs of 2 minibatches (measured: particle methods
    0.08-0.09, badam 0.11, kflow 0.15, bbb 0.22, rdp 0.45; after one epoch 0.88-1.11)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2.0, 2.0, size=(300, 2))
    truth = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] ** 2
    y = truth + 0.1 * rng.normal(size=300)
    train, test = slice(0, 200), slice(200, 300)
    mean_rmse = np.sqrt(np.mean((y[test] - y[train].mean()) ** 2))
    A = np.hstack([X, np.ones((300, 1))])
    coef = np.linalg.lstsq(A[train], y[train], rcond=None)[0]
    linear_rmse = np.sqrt(np.mean((A[test] @ coef - y[test]) ** 2))
    floor = np.sqrt(np.mean((truth[test] - y[test]) ** 2))
    reg = fit_regressor(method, X[train], y[train], hidden=(20,), particles=5, epochs=200, lr=1e-2, seed=0,
                        n_predict=20)
    rmse = reg.rmse(X[test], y[test])
    assert rmse < 0.7 * min(mean_rmse, linear_rmse), (rmse, mean_rmse, linear_rmse)
    if method in PARTICLE_METHODS:
        assert rmse < 1.5 * floor, (rmse, floor)


def test_unknown_method_and_prior_are_config_errors():
    X, y, _ = _linear_problem(n=20)
    with pytest.raises(ConfigError, match="unknown regression method"):
        fit_regressor("sgld", X, y)
    with pytest.raises(ConfigError, match="unknown prior"):
        fit_regressor("svgd", X, y, prior="laplace", epochs=1)


def _write_uci(directory, data, features="0\n1\n", target="2\n", splits="3\n"):
    directory.mkdir()
    np.savetxt(directory / "data.txt", data)
    (directory / "index_features.txt").write_text(features)
    (directory / "index_target.txt").write_text(target)
    (directory / "n_splits.txt").write_text(splits)
    return directory


def test_loader_reads_the_uci_format(tmp_path):
    data = np.arange(30, dtype=float).reshape(10, 3)
    X, y, n_splits = load_uci(_write_uci(tmp_path / "toy", data))
    np.testing.assert_array_equal(X, data[:, :2])
    np.testing.assert_array_equal(y, data[:, 2])
    assert n_splits == 3
    X, y, n = load_uci(ROOT / "benchmarks" / "data" / "uci" / "yacht")
    assert X.shape == (308, 6) and y.shape == (308,) and n == 20


@pytest.mark.parametrize("kind", ["missing", "bad_index", "not_numbers", "two_targets"])
def test_loader_rejects_a_malformed_directory(tmp_path, kind):
    d = _write_uci(tmp_path / kind, np.ones((5, 3)), target="5\n" if kind == "bad_index" else
                   "1\n2\n" if kind == "two_targets" else "2\n")
    if kind == "missing":
        (d / "n_splits.txt").unlink()
    if kind == "not_numbers":
        (d / "data.txt").write_text("1 2 x\n3 4 5\n")
    with pytest.raises(ConfigError) as info:
        load_uci(d)
    assert "\n" not in str(info.value)


def test_splits_are_seeded_disjoint_ninety_ten():
    train, test = split_indices(308, 4)
    assert len(train) == 277 and len(test) == 31
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(308))
    np.testing.assert_array_equal(split_indices(308, 4)[0], train)
    assert not np.array_equal(split_indices(308, 5)[0], train)


def test_results_section_is_replaced_not_duplicated(tmp_path):
    uci = _uci_module()
    path = tmp_path / "results.md"
    path.write_text("# Results\n\n## Other\n\nkeep me\n")
    uci.write_section(path, "yacht", {("svgd", "joint"): "| svgd | joint | 1 | old |"}, "note")
    uci.write_section(path, "yacht", {("svgd", "joint"): "| svgd | joint | 2 | new |",
                                      ("bbb", "-"): "| bbb | - | 2 | new |"}, "note")
    uci.write_section(path, "energy", {("kron", "invgamma"): "| kron | invgamma | 1 | e |"}, "note")
    text = path.read_text()
    assert text.count("## UCI regression: yacht") == 1 and text.count("## UCI regression: energy") == 1
    assert "old" not in text and "| svgd | joint | 2 | new |" in text and "| bbb | - | 2 | new |" in text
    assert "keep me" in text and "0.47" in text


def test_benchmark_script_end_to_end(tmp_path):
    data = np.random.default_rng(0).normal(size=(40, 3))
    d = _write_uci(tmp_path / "tiny", data, splits="2\n")
    proc = run_script("benchmarks/uci.py", "--data", str(d), "--methods", "svgd,bbb", "--epochs", "1",
                      "--jobs", "1", "--particles", "3", "--out", str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-2:]
    assert [line.split()[2] for line in last] == ["method=svgd", "method=bbb"]
    for line in last:
        assert line.startswith("uci set=tiny ") and "splits=2 rmse=" in line and "seconds_per_split=" in line
    assert "## UCI regression: tiny" in (tmp_path / "out" / "uci_tiny.md").read_text()
    bad = run_script("benchmarks/uci.py", "--data", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_update_flag_reaches_the_stein_methods_only(tmp_path):
    """``--update`` options go to fit_regressor's update_options for a Stein method (the same fit
    as calling it directly, and not the weight-space one) and are dropped for the others."""
    uci = _uci_module()
    data = np.random.default_rng(1).normal(size=(40, 3))
    d = _write_uci(tmp_path / "tiny", data)
    opts = dict(hidden=(5,), particles=3, epochs=2, batch_size=10, lr=1e-2, prior="joint", optimizer="adam",
                noise_scale=10.0)
    functions = {"kernel": {"space": "functions", "states": 4}}
    _, _, rmse_f, ll_f, _ = uci.run_split(str(d), "svgd", 0, {**opts, "update_options": functions})
    X, y, _ = load_uci(d)
    train, test = split_indices(len(y), 0)
    direct = fit_regressor("svgd", X[train], y[train], seed=0, update_options=functions, **opts)
    assert rmse_f == direct.rmse(X[test], y[test]) and ll_f == direct.test_log_likelihood(X[test], y[test])
    assert uci.run_split(str(d), "svgd", 0, {**opts, "update_options": {}})[2] != rmse_f
    independent = [uci.run_split(str(d), "independent", 0, {**opts, "update_options": u})[2] for u in (functions, {})]
    assert independent[0] == independent[1]
    assert uci.method_label("svgd", functions) == "svgd update.kernel.space=functions update.kernel.states=4"
    assert uci.method_label("independent", functions) == "independent"


@pytest.mark.parametrize("items, message", [
    (["kernel={space: fn}"], "kernel 'rbf': parameter 'space' must be one of weights, functions"),
    (["kernel={space: functions, states: 1}"], "kernel 'rbf': parameter 'states' must be >= 2"),
    (["kernel={space: functions, states: 101}"], "--update: update.kernel states 101 is more than the minibatch "
                                                 "(--batch-size 100)"),
    (["kernel_space=functions"], "--update kernel_space: not an option of the Stein update"),
    (["kernel"], "--update expects KEY=VALUE"),
])
def test_update_flag_errors_are_one_line(items, message):
    with pytest.raises(ConfigError) as info:
        _uci_module().parse_update(items, batch_size=100)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_benchmark_script_keeps_weight_and_function_space_rows_apart(tmp_path):
    """A run with --update adds its own rows (svgd update.kernel.space=functions) beside the plain
    svgd row of an earlier run; the summary lines name the update; --update without a Stein method
    is refused in one line."""
    data = np.random.default_rng(0).normal(size=(40, 3))
    d = _write_uci(tmp_path / "tiny", data, splits="1\n")
    common = ["--data", str(d), "--epochs", "1", "--jobs", "1", "--particles", "3", "--batch-size", "10",
              "--out", str(tmp_path / "out")]
    plain = run_script("benchmarks/uci.py", *common, "--methods", "svgd", timeout=120)
    assert plain.returncode == 0, plain.stderr
    proc = run_script("benchmarks/uci.py", *common, "--methods", "svgd,independent", "--update",
                      "kernel={space: functions, states: 4}", timeout=120)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-2:]
    assert last[0].startswith("uci set=tiny method=svgd update.kernel.space=functions update.kernel.states=4 "
                              "splits=1 rmse=")
    assert last[1].startswith("uci set=tiny method=independent splits=1 rmse=")
    rows = [line.split("|")[1].strip() for line in (tmp_path / "out" / "uci_tiny.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| method")]
    assert rows == ["svgd", "svgd update.kernel.space=functions update.kernel.states=4", "independent"]
    bad = run_script("benchmarks/uci.py", *common, "--methods", "bbb", "--update", "kernel={space: functions}")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --update sets the Stein update's options; --methods bbb has no Stein method (svgd, s2vgd, vmg, kron)"]
