"""Bayes by Backprop (steinrl.bayes.bbb) and the shared interface (steinrl.bayes.base).

References are independent of the code: the conjugate Bayesian linear-regression posterior
in closed form (numpy), KLs by numpy/scipy Monte Carlo or quadrature, scipy densities.
"""

import functools
import inspect

import numpy as np
import pytest
import torch
from conftest import check_posterior_draws
from scipy import integrate, stats

from steinrl.bayes import POSTERIORS, BayesByBackprop, gaussian_log_likelihood, make_posterior
from steinrl.errors import ConfigError
from steinrl.registry import options_of


def _set_gaussians(q: BayesByBackprop, rng: np.random.Generator) -> None:
    """Spread the posterior means and stds so the KL checks are not at the initial values."""
    with torch.no_grad():
        for g in [*q.weights, *q.biases]:
            g.mean.copy_(torch.as_tensor(rng.normal(0.0, 0.5, g.mean.shape)))
            std = torch.as_tensor(rng.uniform(0.05, 0.6, g.mean.shape))
            g.rho.copy_(torch.log(torch.expm1(std)))


def _flat_moments(q: BayesByBackprop) -> tuple[np.ndarray, np.ndarray]:
    gaussians = [*q.weights, *q.biases]
    mean = np.concatenate([g.mean.detach().double().numpy().ravel() for g in gaussians])
    std = np.concatenate([g.std.detach().double().numpy().ravel() for g in gaussians])
    return mean, std


def test_conjugate_linear_regression_reaches_exact_posterior():
    """One linear layer, Gaussian prior, known noise: the optimal diagonal Gaussian has the
    exact posterior mean and std 1/√Λ_ii (Λ the posterior precision)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n, d, noise_std, prior_std = 40, 3, 0.5, 1.0
    x = rng.normal(size=(n, d))
    y = x @ np.array([1.0, -0.5, 0.3]) + 0.7 + noise_std * rng.normal(size=n)
    design = np.hstack([x, np.ones((n, 1))])  # weights then bias
    precision = design.T @ design / noise_std**2 + np.eye(d + 1) / prior_std**2
    exact_mean = np.linalg.solve(precision, design.T @ y / noise_std**2)
    mean_field_std = 1.0 / np.sqrt(np.diag(precision))

    g = torch.Generator().manual_seed(0)
    q = make_posterior("bbb", d, [], 1, "identity", prior="gaussian", prior_sigma=prior_std, generator=g)
    opt = q.make_optimizer(0.05)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1.0 + t / 100))
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)[:, None]
    log_lik = functools.partial(gaussian_log_likelihood, noise_precision=noise_std**-2)
    for _ in range(800):
        opt.zero_grad()
        q.elbo_loss(xt, yt, log_lik, n_data=n, n_samples=8, generator=g).backward()
        opt.step()
        schedule.step()
    mean, std = _flat_moments(q)
    np.testing.assert_allclose((mean - exact_mean) / mean_field_std, 0.0, atol=0.15)
    np.testing.assert_allclose(std / mean_field_std, 1.0, atol=0.1)


def test_gaussian_prior_kl_matches_monte_carlo():
    rng = np.random.default_rng(1)
    q = make_posterior("bbb", 3, [4], 2, "tanh", prior="gaussian", prior_sigma=0.8)
    _set_gaussians(q, rng)
    mean, std = _flat_moments(q)
    w = rng.normal(mean, std, size=(200_000, mean.size))
    log_ratio = (stats.norm.logpdf(w, mean, std) - stats.norm.logpdf(w, 0.0, 0.8)).sum(1)
    standard_error = log_ratio.std() / np.sqrt(len(log_ratio))
    assert abs(q.kl().item() - log_ratio.mean()) < 4 * standard_error + 1e-4


def test_scale_mixture_kl_estimate_is_unbiased():
    """Mean of the Monte Carlo kl() against the exact KL per weight by quadrature (eq. 7 prior)."""
    rng = np.random.default_rng(2)
    pi, s1, s2 = 0.25, 1.0, np.exp(-2.0)
    q = make_posterior("bbb", 2, [], 1, "identity", mixture_pi=pi, mixture_sigma1=s1, mixture_sigma2=s2,
                       kl_samples=100_000)
    _set_gaussians(q, rng)
    mean, std = _flat_moments(q)

    def kl_one(m: float, s: float) -> float:
        def integrand(w: float) -> float:
            log_p = np.log(pi * stats.norm.pdf(w, 0, s1) + (1 - pi) * stats.norm.pdf(w, 0, s2))
            return stats.norm.pdf(w, m, s) * (stats.norm.logpdf(w, m, s) - log_p)
        return integrate.quad(integrand, m - 12 * s, m + 12 * s)[0]

    exact = sum(kl_one(m, s) for m, s in zip(mean, std))
    g = torch.Generator().manual_seed(0)
    estimate = q.kl(generator=g).item()
    assert estimate == pytest.approx(exact, abs=0.02)


def test_local_reparameterisation_has_the_sampled_weights_marginals():
    """Pre-activation of one layer: mean x μ + μ_b, variance x² σ² + σ_b² (computed in numpy)."""
    rng = np.random.default_rng(3)
    q = make_posterior("bbb", 3, [], 2, "identity", prior="gaussian")
    _set_gaussians(q, rng)
    x = torch.tensor(rng.normal(size=(5, 3)), dtype=torch.float32)
    mu_w, sd_w = q.weights[0].mean.detach().numpy(), q.weights[0].std.detach().numpy()
    mu_b, sd_b = q.biases[0].mean.detach().numpy(), q.biases[0].std.detach().numpy()
    xn = x.numpy()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        pred, _ = q.predictions_and_kl(x, 100_000, g)
    np.testing.assert_allclose(pred.mean(0).numpy(), xn @ mu_w + mu_b, atol=0.01)
    np.testing.assert_allclose(pred.var(0).numpy(), xn**2 @ sd_w**2 + sd_b**2, rtol=0.03)


def test_gaussian_log_likelihood_with_mask():
    rng = np.random.default_rng(4)
    pred, y = rng.normal(size=(3, 4, 2)), rng.normal(size=(4, 2))
    mask = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=float)
    out = gaussian_log_likelihood(torch.tensor(pred), torch.tensor(y), 2.0, torch.tensor(mask))
    expected = (stats.norm.logpdf(y, pred, np.sqrt(0.5)) * mask).sum(-1)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("prior", ["scale_mixture", "gaussian"])
def test_sample_shapes_forward_and_seeding(prior):
    q = make_posterior("bbb", 5, [7, 6], 3, "relu", prior=prior, generator=torch.Generator().manual_seed(0))
    x = check_posterior_draws(q)
    loss = q.elbo_loss(x, torch.randn(9, 3), gaussian_log_likelihood, n_data=100, n_samples=2)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in q.parameters())


def test_make_posterior_checks_options_and_defaults_match_signatures():
    assert set(POSTERIORS.names()) == {"bbb", "badam", "kflow", "rdp"}
    for name in POSTERIORS:
        cls = POSTERIORS.get(name)
        signature = inspect.signature(cls.__init__).parameters
        for option in options_of(cls):
            assert signature[option.name].default == option.default, (name, option.name)
    with pytest.raises(ConfigError, match="no option"):
        make_posterior("bbb", 2, [], 1, prior_sigmaa=1.0)
    with pytest.raises(ConfigError, match="choose from"):
        make_posterior("bbb", 2, [], 1, prior="laplace")
    with pytest.raises(ConfigError, match="must be > 0"):
        make_posterior("bbb", 2, [], 1, prior_sigma=0.0)
    with pytest.raises(ConfigError, match="unknown posterior"):
        make_posterior("bb", 2, [], 1)
