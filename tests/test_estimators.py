"""GAE and returns-to-go against hand computations (as SB3's tests/test_gae.py)."""

import numpy as np
import pytest
import torch

from steinrl.rl.estimators import returns as R


def discounted_returns(r, done, gamma):
    return R.discounted_returns(torch.as_tensor(r), torch.as_tensor(done), gamma).numpy()


def gae(r, v, term, done, gamma, lam):
    adv, ret = R.gae(torch.as_tensor(r), torch.as_tensor(v), torch.as_tensor(term), torch.as_tensor(done), gamma, lam)
    return adv.numpy(), ret.numpy()


def standardize(x, mask, axis):
    return R.standardize(torch.as_tensor(x), torch.as_tensor(mask), dim=axis).numpy()


def test_returns_to_go_by_hand():
    r = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    done = np.array([False, True, False, False, False])  # episode 1: steps 0-1; episode 2 cut at the end
    g = discounted_returns(r, done, gamma=0.5)
    expected = [1 + 0.5 * 2, 2, 3 + 0.5 * 4 + 0.25 * 5, 4 + 0.5 * 5, 5]
    np.testing.assert_allclose(g, expected)


def test_gae_terminal_truncated_and_cut():
    gamma, lam = 0.9, 0.8
    r = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    v = np.array([0.5, 0.4, 0.3, 0.2, 0.1, 0.7, 0.6])  # values[t + 1] follows step t
    term = np.array([False, True, False, False, False, False])
    trunc = np.array([False, False, False, True, False, False])
    done = term | trunc
    adv, ret = gae(r, v, term, done, gamma, lam)
    # hand computation, step by step
    d0 = r[0] + gamma * v[1] - v[0]
    d1 = r[1] + 0.0 - v[1]                      # terminal: next value ignored
    d2 = r[2] + gamma * v[3] - v[2]
    d3 = r[3] + gamma * v[4] - v[3]             # truncated: bootstrap from the final obs' value
    d4 = r[4] + gamma * v[5] - v[4]
    d5 = r[5] + gamma * v[6] - v[5]             # cut at the batch end: bootstrap
    a1 = d1
    a0 = d0 + gamma * lam * a1
    a3 = d3
    a2 = d2 + gamma * lam * a3
    a5 = d5
    a4 = d4 + gamma * lam * a5
    np.testing.assert_allclose(adv, [a0, a1, a2, a3, a4, a5], rtol=1e-12)
    np.testing.assert_allclose(ret, adv + v[:6], rtol=1e-12)


def test_gae_lambda_one_equals_discounted_return_minus_value():
    rng = np.random.default_rng(0)
    r = rng.normal(size=(7, 3))
    v = rng.normal(size=(8, 3))
    term = np.zeros((7, 3), bool)
    term[6] = True  # every column terminates at the last step
    adv, _ = gae(r, v, term, term, gamma=0.95, lam=1.0)
    g = discounted_returns(r, term, gamma=0.95)
    np.testing.assert_allclose(adv, g - v[:7], rtol=1e-10, atol=1e-12)


def test_standardize_per_particle_ignores_masked_entries():
    x = np.array([[[1.0, 100.0], [3.0, -50.0]], [[5.0, 7.0], [9.0, 11.0]]])  # (T=2, M=2, E=2)
    mask = np.array([[[True, False], [True, True]], [[True, False], [True, True]]])
    z = standardize(x, mask, axis=(0, 2))
    p0 = np.array([1.0, 5.0])
    np.testing.assert_allclose(z[:, 0, 0], (p0 - p0.mean()) / p0.std(), rtol=1e-6)
    assert np.all(z[:, 0, 1] == 0.0)
    for m in range(2):
        vals = z[:, m][mask[:, m]]
        assert vals.mean() == pytest.approx(0.0, abs=1e-9)
        assert vals.std() == pytest.approx(1.0, rel=1e-6)


def test_explained_variance_per_particle_over_valid_steps():
    def explained_variance(values, targets, valid):
        return float(R.explained_variance(torch.as_tensor(values), torch.as_tensor(targets),
                                          torch.as_tensor(valid)).nanmean())

    rng = np.random.default_rng(0)
    T, M, E = 7, 3, 2
    targets = rng.normal(size=(T, M, E))
    values = targets + rng.normal(scale=0.5, size=(T, M, E))
    valid = rng.random((T, M, E)) > 0.3
    ref = []
    for m in range(M):  # naive: one particle at a time over its valid entries
        t, v = targets[:, m][valid[:, m]], values[:, m][valid[:, m]]
        ref.append(1.0 - np.var(t - v) / np.var(t))
    assert explained_variance(values, targets, valid) == pytest.approx(np.mean(ref))
    assert explained_variance(targets, targets, valid) == pytest.approx(1.0)


def test_linear_baseline_matches_rllab_least_squares_per_particle():
    """The batched fit against rllab's recipe run one particle at a time in numpy."""
    import torch

    from steinrl.rl.critics import LinearBaseline
    from steinrl.rl.samples import Samples

    rng = np.random.default_rng(1)
    M, B, d = 3, 50, 4
    obs = rng.normal(scale=4.0, size=(M, B, d))  # some entries beyond the ±10 clip after scaling
    obs[0, :5] *= 5.0
    t = rng.integers(0, 500, size=(M, B))
    returns = rng.normal(size=(M, B)) + obs[..., 0] - 0.01 * t
    mask = rng.random((M, B)) > 0.2
    base = LinearBaseline(M, d)
    samples = Samples(obs=torch.as_tensor(obs), actions=None, timestep=torch.as_tensor(t),
                      mask=torch.as_tensor(mask, dtype=torch.float32), advantages=None,
                      targets=torch.as_tensor(returns))
    before = base.fit(samples)
    np.testing.assert_allclose(before.numpy(), [np.mean(returns[m][mask[m]] ** 2) for m in range(M)], rtol=1e-10)
    pred = base(torch.as_tensor(obs), torch.as_tensor(t)).numpy()
    for m in range(M):  # rllab's LinearFeatureBaseline._features / fit, on particle m's valid samples
        o = np.clip(obs[m][mask[m]], -10, 10)
        al = t[m][mask[m]].reshape(-1, 1) / 100.0
        f = np.concatenate([o, o ** 2, al, al ** 2, al ** 3, np.ones_like(al)], axis=1)
        coeffs = np.linalg.lstsq(f.T @ f + 1e-5 * np.eye(f.shape[1]), f.T @ returns[m][mask[m]], rcond=None)[0]
        np.testing.assert_allclose(base.coeffs[m].numpy(), coeffs, rtol=1e-6, atol=1e-8)
        o_all = np.clip(obs[m], -10, 10)
        al_all = t[m].reshape(-1, 1) / 100.0
        f_all = np.concatenate([o_all, o_all ** 2, al_all, al_all ** 2, al_all ** 3, np.ones_like(al_all)], axis=1)
        np.testing.assert_allclose(pred[m], f_all @ coeffs, rtol=1e-6, atol=1e-6)
