"""NIGLinearRegression against the batch closed form (plain numpy inverse, written out here) and
against the Student-t moments of the Normal-Inverse-Gamma posterior."""

import numpy as np
import pytest

from steinrl.bandits import NIGLinearRegression
from steinrl.errors import ConfigError

A0, B0, LAMBDA = 6.0, 6.0, 0.25


def batch_posterior(features, rewards, intercept=True, a0=A0, b0=B0, lam=LAMBDA):
    """Showdown's LinFullPost update for one arm from all its data, with an explicit inverse."""
    z = np.hstack([features, np.ones((len(features), 1))]) if intercept else features
    precision = z.T @ z + lam * np.eye(z.shape[1])
    covariance = np.linalg.inv(precision)
    mean = covariance @ z.T @ rewards
    a = a0 + len(features) / 2
    b = b0 + 0.5 * (rewards @ rewards - mean @ precision @ mean)
    return mean, covariance, precision, a, b


def covariance_of(model: NIGLinearRegression) -> np.ndarray:
    """``(k, D, D)`` Σ = Λ⁻¹ per arm (the weights' covariance given σ² = 1), from the model's precision."""
    return np.linalg.inv(model.precision)


def toy_data(rng, n, num_features, num_arms):
    features = rng.standard_normal((n, num_features))
    arms = rng.integers(0, num_arms, n)
    weights = rng.standard_normal((num_arms, num_features))
    rewards = np.einsum("nf,nf->n", features, weights[arms]) + 0.3 + 0.5 * rng.standard_normal(n)
    return features, arms, rewards


@pytest.mark.parametrize("intercept", [True, False])
def test_posterior_after_chunked_updates_equals_batch_closed_form(intercept):
    rng = np.random.default_rng(0)
    num_arms, num_features = 4, 5
    features, arms, rewards = toy_data(rng, 300, num_features, num_arms)
    arms[arms == 3] = 2  # arm 3 never pulled: stays at the prior
    model = NIGLinearRegression(num_arms, num_features, intercept=intercept)
    assert model.dim == num_features + intercept
    bounds = [0, 1, 2, 40, 41, 170, 300]  # single rows, a chunk, an empty-for-some-arms chunk
    for start, stop in zip(bounds[:-1], bounds[1:]):
        model.observe(features[start:stop], arms[start:stop], rewards[start:stop])
        _ = model.mean  # reading in between must not change the result
    for arm in range(num_arms):
        mask = arms == arm
        mean, covariance, precision, a, b = batch_posterior(features[mask], rewards[mask], intercept)
        np.testing.assert_allclose(model.mean[arm], mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(covariance_of(model)[arm], covariance, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(model.precision[arm], precision, rtol=1e-12)
        assert model.a[arm] == pytest.approx(a, rel=1e-12)
        assert model.b[arm] == pytest.approx(b, rel=1e-10)
        assert model.counts[arm] == mask.sum()
    np.testing.assert_array_equal(model.mean[3], 0.0)
    np.testing.assert_allclose(covariance_of(model)[3], np.eye(model.dim) / LAMBDA)
    assert (model.a[3], model.b[3]) == (A0, B0)


def test_fit_replaces_the_data_and_reset_forgets_it():
    rng = np.random.default_rng(1)
    features, arms, rewards = toy_data(rng, 120, 3, 2)
    model = NIGLinearRegression(2, 3, a0=2.0, b0=0.5, lambda_prior=1.0)
    model.observe(*toy_data(rng, 50, 3, 2))
    model.fit(features, arms, rewards)
    for arm in range(2):
        mean, covariance, _, a, b = batch_posterior(features[arms == arm], rewards[arms == arm], True, 2.0, 0.5, 1.0)
        np.testing.assert_allclose(model.mean[arm], mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(covariance_of(model)[arm], covariance, rtol=1e-10, atol=1e-12)
        assert (model.a[arm], model.b[arm]) == (pytest.approx(a), pytest.approx(b))
    model.reset()
    np.testing.assert_array_equal(model.mean, 0.0)
    np.testing.assert_array_equal(model.b, 0.5)


def test_samples_match_student_t_moments():
    """β | data ~ multivariate t_{2a}(μ, (b/a)Σ): mean μ, covariance b/(a−1)·Σ, and every
    coordinate's excess kurtosis 6/(2a − 4) (a fixed σ² would give 0)."""
    rng = np.random.default_rng(2)
    features, arms, rewards = toy_data(rng, 12, 2, 2)  # little data: wide, heavy-tailed posterior
    model = NIGLinearRegression(2, 2)
    model.observe(features, arms, rewards)
    num_samples = 200_000
    samples = model.sample(np.random.default_rng(3), num_samples)  # S k D
    assert samples.shape == (num_samples, 2, 3)
    mean, covariance, a, b = model.mean, covariance_of(model), model.a, model.b
    for arm in range(2):
        target_cov = b[arm] / (a[arm] - 1) * covariance[arm]
        standard_error = np.sqrt(np.diag(target_cov) / num_samples)
        assert np.all(np.abs(samples[:, arm].mean(0) - mean[arm]) < 4 * standard_error)
        sample_cov = np.cov(samples[:, arm], rowvar=False)
        scale = np.sqrt(np.outer(np.diag(target_cov), np.diag(target_cov)))
        np.testing.assert_allclose(sample_cov / scale, target_cov / scale, atol=0.03)
        standardised = (samples[:, arm] - mean[arm]) / np.sqrt(np.diag(target_cov))
        excess_kurtosis = (standardised**4).mean(0) - 3.0
        np.testing.assert_allclose(excess_kurtosis, 6.0 / (2 * a[arm] - 4), atol=0.1)


def test_single_draw_shape_and_thompson_rewards_concentrate_on_the_truth():
    rng = np.random.default_rng(4)
    weights = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, -1.0]])
    offsets = np.array([0.3, -0.7])
    features = rng.standard_normal((4000, 3))
    arms = rng.integers(0, 2, 4000)
    rewards = np.einsum("nf,nf->n", features, weights[arms]) + offsets[arms] + 0.01 * rng.standard_normal(4000)
    model = NIGLinearRegression(2, 3)
    model.observe(features, arms, rewards)
    assert model.sample(rng).shape == (2, 4)
    test_features = rng.standard_normal((5, 3))
    np.testing.assert_allclose(model.sample_rewards(test_features, rng), test_features @ weights.T + offsets, atol=0.02)


def test_input_validation():
    model = NIGLinearRegression(2, 3)
    with pytest.raises(ValueError, match="arms"):
        model.observe(np.zeros((2, 3)), np.array([0, 2]), np.zeros(2))
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        model.observe(np.zeros((2, 4)), np.array([0, 1]), np.zeros(2))
    with pytest.raises(ValueError, match="one arm and one reward"):
        model.observe(np.zeros((2, 3)), np.array([0]), np.zeros(2))
    with pytest.raises(ConfigError, match="lambda_prior"):
        NIGLinearRegression(2, 3, lambda_prior=0.0)
