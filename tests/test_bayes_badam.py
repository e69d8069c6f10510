"""BADAM (steinrl.bayes.badam): the posterior of eq. 14 read from Adam's second moments.

References: a separate numpy implementation of Algorithm 2 and eq. 14, and the exact
conjugate posterior of a quadratic (Gaussian) problem whose gradient noise makes √v the curvature.
"""

import functools

import numpy as np
import pytest
import torch

from steinrl.bayes import BADAM, gaussian_log_likelihood, make_posterior
from steinrl.core.ensemble import mlp_forward

CURVATURE = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
CENTRE = np.array([0.3, -0.2, 0.1, 0.0, 0.5])


def _quadratic_gradients(steps: int, seed: int) -> np.ndarray:
    """Targets ξ_t ~ N(c, 1) of f_t(θ) = ½ Σ_i h_i (θ_i − ξ_t,i)²: ∇f_t = h (θ − ξ_t), E[∇f²] ≈ h² at θ ≈ c."""
    return np.random.default_rng(seed).normal(CENTRE, 1.0, size=(steps, CENTRE.size))


def test_posterior_is_eq14_of_a_reference_adam():
    """Mean and std after T steps equal eq. 14 computed from a numpy Algorithm 2 on the same problem."""
    lr, beta1, beta2, eps, prior_sigma, n_data, steps = 0.01, 0.9, 0.99, 1e-8, 0.3, 50.0, 300
    targets = _quadratic_gradients(steps, seed=0)
    theta = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    opt = BADAM([theta], lr=lr, betas=(beta1, beta2), eps=eps, prior_sigma=prior_sigma)

    ref_theta, m, v = np.zeros(5), np.zeros(5), np.zeros(5)
    for t, xi in enumerate(targets, start=1):
        opt.zero_grad()
        theta.grad = torch.as_tensor(CURVATURE * (theta.detach().numpy() - xi))
        opt.step()
        g = CURVATURE * (ref_theta - xi)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        ref_theta = ref_theta - lr * m_hat / (np.sqrt(v_hat) + eps)
    likelihood_precision = n_data * np.sqrt(v_hat)
    precision = likelihood_precision + prior_sigma**-2
    mean, std = opt.posterior(theta, n_data)
    np.testing.assert_allclose(theta.detach().numpy(), ref_theta, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mean.numpy(), likelihood_precision / precision * ref_theta, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std.numpy(), precision**-0.5, rtol=1e-9)


def test_posterior_variance_on_a_quadratic_matches_its_curvature():
    """With unit-variance targets, √v → h (the curvature), so eq. 14's variance is the exact
    conjugate posterior variance 1/(N h + 1/σ²) of N observations ξ ~ N(θ, 1/h)."""
    prior_sigma, n_data, steps = 0.5, 200.0, 6000
    targets = _quadratic_gradients(steps, seed=1)
    theta = torch.tensor(CENTRE, dtype=torch.float64, requires_grad=True)
    opt = BADAM([theta], lr=1e-3, prior_sigma=prior_sigma)
    for xi in targets:
        opt.zero_grad()
        theta.grad = torch.as_tensor(CURVATURE * (theta.detach().numpy() - xi))
        opt.step()
    _, std = opt.posterior(theta, n_data)
    exact_variance = 1.0 / (n_data * CURVATURE + prior_sigma**-2)
    np.testing.assert_allclose(std.numpy() ** 2, exact_variance, rtol=0.1)


def test_network_posterior_samples_and_n_rules():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(32, 3)), dtype=torch.float32)
    y = x.sum(1, keepdim=True) + 0.1 * torch.tensor(rng.normal(size=(32, 1)), dtype=torch.float32)
    q = make_posterior("badam", 3, [8], 1, "tanh", prior_sigma=0.2, beta2=0.99,
                       generator=torch.Generator().manual_seed(0))

    prior_draw = q.sample(20_000, torch.Generator().manual_seed(1))[0][0]  # before training: the prior
    assert prior_draw.mean().item() == pytest.approx(0.0, abs=0.01)
    assert prior_draw.std().item() == pytest.approx(0.2, rel=0.01)

    opt = q.make_optimizer(lr=0.01)
    log_lik = functools.partial(gaussian_log_likelihood, noise_precision=100.0)
    for _ in range(50):
        opt.zero_grad()
        q.elbo_loss(x, y, log_lik, n_data=1000).backward()
        opt.step()
    # The loss is f_t: the mean negative log-likelihood at the point weights.
    dense = [(w[None], b[None]) for w, b in zip(q.weights, q.biases)]
    expected_loss = -log_lik(mlp_forward(dense, x, "tanh"), y).mean().item()
    assert q.elbo_loss(x, y, log_lik, n_data=1000).item() == pytest.approx(expected_loss, rel=1e-6)

    def eq14(param: torch.Tensor, n: float) -> tuple[np.ndarray, np.ndarray]:
        state = opt.state[param]
        v_hat = state["exp_avg_sq"].numpy() / (1 - 0.99 ** state["step"].item())
        precision = n * np.sqrt(v_hat) + 0.2**-2
        return n * np.sqrt(v_hat) / precision * param.detach().numpy(), precision**-0.5

    mean, std = eq14(q.weights[0], 1000.0)
    draws = q.sample(20_000, torch.Generator().manual_seed(2))[0][0].numpy()
    np.testing.assert_allclose(draws.mean(0), mean, atol=4 * std.max() / np.sqrt(20_000))
    np.testing.assert_allclose(draws.std(0), std, rtol=0.03)
    assert q.kl().item() > 0

    seen = make_posterior("badam", 3, [8], 1, "tanh", prior_sigma=0.2, beta2=0.99, n_rule="seen")
    seen.load_state_dict(q.state_dict())
    seen.make_optimizer(0.01).load_state_dict(opt.state_dict())
    seen.batch_size = 32
    mean_seen, std_seen = seen.moments()[0]
    expected_mean, expected_std = eq14(q.weights[0], 50 * 32.0)
    np.testing.assert_allclose(std_seen.numpy(), expected_std, rtol=1e-5)
    np.testing.assert_allclose(mean_seen.numpy(), expected_mean, rtol=1e-5, atol=1e-7)


def test_sample_shapes_forward_and_seeding():
    q = make_posterior("badam", 5, [7, 6], 3, "relu", generator=torch.Generator().manual_seed(0))
    opt = q.make_optimizer(1e-2)
    x = torch.randn(9, 5)
    q.elbo_loss(x, torch.randn(9, 3), gaussian_log_likelihood, n_data=100).backward()
    opt.step()
    draws = q.sample(4, torch.Generator().manual_seed(1))
    assert [(tuple(w.shape), tuple(b.shape)) for w, b in draws] == [((4, 5, 7), (4, 7)), ((4, 7, 6), (4, 6)),
                                                                    ((4, 6, 3), (4, 3))]
    assert mlp_forward(draws, x, "relu").shape == (4, 9, 3)
    again = q.sample(4, torch.Generator().manual_seed(1))
    assert all(torch.equal(w, w2) and torch.equal(b, b2) for (w, b), (w2, b2) in zip(draws, again))
