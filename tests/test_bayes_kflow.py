"""K-Linear Kronecker flow (steinrl.bayes.kflow), section 3.1 of the Kronecker-flow paper.

References: the factors are rebuilt in numpy from the raw parameters (masking, softplus),
the covariance from np.kron, the KL from the dense Gaussian formula with slogdet.
"""

import numpy as np
import pytest
import torch
from conftest import check_posterior_draws

from steinrl.bayes import KroneckerFlowPosterior, gaussian_log_likelihood, make_posterior
from steinrl.bayes.kflow import KroneckerLinearLayer


def _random_layer(fan_in: int, fan_out: int, seed: int) -> KroneckerLinearLayer:
    rng = np.random.default_rng(seed)
    layer = KroneckerLinearLayer(torch.zeros(fan_in, fan_out, dtype=torch.float64), 0.1)
    with torch.no_grad():
        layer.mean.copy_(torch.as_tensor(rng.normal(size=(fan_in, fan_out))))
        layer.rho.copy_(torch.as_tensor(rng.normal(-1.0, 0.7, size=(fan_in, fan_out))))
        layer.a_raw.copy_(torch.as_tensor(rng.normal(0, 0.6, size=(fan_in, fan_in))))  # upper part must be inert
        layer.b_raw.copy_(torch.as_tensor(rng.normal(0, 0.6, size=(fan_out, fan_out))))
    return layer


def _numpy_factors(layer: KroneckerLinearLayer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.tril(layer.a_raw.detach().numpy(), -1) + np.eye(layer.a_raw.shape[0])
    b = np.tril(layer.b_raw.detach().numpy(), -1) + np.eye(layer.b_raw.shape[0])
    s = np.log1p(np.exp(layer.rho.detach().numpy()))
    return a, s, b


def _vec(w: np.ndarray) -> np.ndarray:
    """Column-major vectorisation of ``(..., n, p)`` -> ``(..., n p)``."""
    return np.swapaxes(w, -1, -2).reshape(*w.shape[:-2], -1)


def _covariance(a: np.ndarray, s: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Property 1 (P1): Σ = (Bᵀ ⊗ A) diag(vec S²) (B ⊗ Aᵀ)."""
    left = np.kron(b.T, a)
    return left @ np.diag(_vec(s**2)) @ left.T


def test_sample_covariance_is_the_kronecker_product_of_the_factors():
    layer = _random_layer(3, 4, seed=0)
    a, s, b = _numpy_factors(layer)
    with torch.no_grad():
        w = layer.sample(200_000, torch.Generator().manual_seed(0)).numpy()
    vec_w = _vec(w)
    expected = _covariance(a, s, b)
    np.testing.assert_allclose(vec_w.mean(0), _vec(layer.mean.detach().numpy()), atol=0.02)
    np.testing.assert_allclose(np.cov(vec_w, rowvar=False), expected, atol=0.015 * np.abs(expected).max())
    np.testing.assert_allclose(layer.marginal_variance().detach().numpy(), np.diag(expected).reshape(4, 3).T,
                               rtol=1e-10)


def test_unit_scales_give_btb_kron_aat():
    """With S ≡ 1, vec(M + A E B) ~ N(vec M, BᵀB ⊗ AAᵀ) (section 3.1)."""
    layer = _random_layer(2, 3, seed=1)
    with torch.no_grad():
        layer.rho.fill_(float(np.log(np.e - 1.0)))  # softplus(ρ) = 1
    a, _, b = _numpy_factors(layer)
    with torch.no_grad():
        vec_w = _vec(layer.sample(200_000, torch.Generator().manual_seed(1)).numpy())
    expected = np.kron(b.T @ b, a @ a.T)
    np.testing.assert_allclose(np.cov(vec_w, rowvar=False), expected, atol=0.015 * np.abs(expected).max())


@pytest.mark.parametrize("prior_mean", ["zero", "init"])
def test_kl_matches_the_dense_gaussian_formula(prior_mean):
    prior_sigma = 0.7
    q = make_posterior("kflow", 3, [4], 2, "tanh", prior_sigma=prior_sigma, prior_mean=prior_mean,
                       generator=torch.Generator().manual_seed(0))
    q.double()
    rng = np.random.default_rng(2)
    expected = 0.0
    for _i, layer in enumerate(q.layers):
        centre = layer.mean.detach().numpy().copy() if prior_mean == "init" else 0.0
        with torch.no_grad():
            layer.mean.add_(torch.as_tensor(rng.normal(0, 0.3, size=layer.mean.shape)))
            layer.rho.copy_(torch.as_tensor(rng.normal(-1.0, 0.5, size=layer.rho.shape)))
            layer.a_raw.copy_(torch.as_tensor(rng.normal(0, 0.4, size=layer.a_raw.shape)))
            layer.b_raw.copy_(torch.as_tensor(rng.normal(0, 0.4, size=layer.b_raw.shape)))
        sigma = _covariance(*_numpy_factors(layer))
        diff = _vec(layer.mean.detach().numpy() - centre)
        lam, dim = prior_sigma**2, diff.size
        expected += 0.5 * (np.trace(sigma) / lam + diff @ diff / lam - dim + dim * np.log(lam)
                           - np.linalg.slogdet(sigma)[1])
    for bias in q.biases:
        mu, sd = bias.mean.detach().numpy(), bias.std.detach().numpy()
        expected += (np.log(prior_sigma / sd) + (sd**2 + mu**2) / (2 * prior_sigma**2) - 0.5).sum()
    assert q.kl().item() == pytest.approx(expected, rel=1e-10)


def test_sample_shapes_forward_seeding_and_gradients():
    q = make_posterior("kflow", 5, [7, 6], 3, "relu", generator=torch.Generator().manual_seed(0))
    assert isinstance(q, KroneckerFlowPosterior)
    x = check_posterior_draws(q)
    q.elbo_loss(x, torch.randn(9, 3), gaussian_log_likelihood, n_data=100, n_samples=2).backward()
    for layer in q.layers:
        assert torch.isfinite(layer.a_raw.grad).all()
        assert layer.a_raw.grad.triu().abs().max() == 0  # diagonal and upper entries are masked out
        assert layer.b_raw.grad.tril(-1).abs().max() > 0
