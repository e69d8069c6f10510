"""Priors against independent references (torch.distributions, scipy quadrature)."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from steinrl.core.priors import PRIORS, GaussianPrior, InvGammaPrior, JointGammaPrior, make_prior
from steinrl.errors import ConfigError


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gaussian_matches_torch_normal(dtype):
    torch.manual_seed(0)
    var = 0.01
    x = torch.randn(5, 7, dtype=dtype) * 0.2
    ref = torch.distributions.Normal(torch.zeros((), dtype=dtype), math.sqrt(var)).log_prob(x).sum(-1)
    got = GaussianPrior(var).log_prob_group(x)
    assert got.shape == (5,) and got.dtype == dtype
    torch.testing.assert_close(got, ref)


def test_gaussian_gradient():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    GaussianPrior(0.5).log_prob_group(x).sum().backward()
    torch.testing.assert_close(x.grad, -x.detach() / 0.5)


def _invgamma_marginal_quad(x: np.ndarray, a: float, b: float) -> float:
    """log ∫ N(x; 0, s²I) Inv-Gamma(s²; a, b) ds², by quadrature (independent of the closed form)."""
    n = x.size
    sq = float(np.sum(x**2))

    def integrand(s2):
        return np.exp(-0.5 * n * np.log(2 * np.pi * s2) - 0.5 * sq / s2) * stats.invgamma.pdf(s2, a, scale=b)

    val, _ = integrate.quad(integrand, 0.0, np.inf, limit=500, epsabs=0, epsrel=1e-11)
    return math.log(val)


@pytest.mark.parametrize("a,b,n", [(1.0, 0.1, 1), (1.0, 0.1, 3), (2.5, 0.7, 4)])
def test_invgamma_matches_quadrature(a, b, n):
    rng = np.random.default_rng(n)
    x = rng.normal(scale=0.3, size=(3, n))
    got = InvGammaPrior(a, b).log_prob_group(torch.tensor(x)).numpy()
    ref = np.array([_invgamma_marginal_quad(row, a, b) for row in x])
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_invgamma_n1_is_student_t(dtype):
    a, b = 1.0, 0.1
    x = torch.linspace(-2, 2, 11, dtype=dtype).reshape(11, 1)
    ref = torch.distributions.StudentT(df=2 * a, loc=0.0, scale=math.sqrt(b / a)).log_prob(x.double()).squeeze(1)
    got = InvGammaPrior(a, b).log_prob_group(x)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), ref, rtol=1e-5 if dtype == torch.float32 else 1e-10, atol=1e-5)


def test_invgamma_multivariate_is_scaled_student_t():
    # multivariate t with ν = 2a, Σ = (b/a) I: scipy's implementation as the reference
    a, b, n = 1.5, 0.2, 5
    rng = np.random.default_rng(1)
    x = rng.normal(scale=0.4, size=(4, n))
    ref = stats.multivariate_t(loc=np.zeros(n), shape=(b / a) * np.eye(n), df=2 * a).logpdf(x)
    got = InvGammaPrior(a, b).log_prob_group(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_invgamma_gradient_formula_and_finite_differences():
    a, b = 1.0, 0.1
    torch.manual_seed(0)
    x = (0.3 * torch.randn(3, 6, dtype=torch.float64)).requires_grad_(True)
    prior = InvGammaPrior(a, b)
    prior.log_prob_group(x).sum().backward()
    xd = x.detach()
    n = xd.shape[1]
    formula = -(a + n / 2) * xd / (b + 0.5 * xd.square().sum(1, keepdim=True))
    torch.testing.assert_close(x.grad, formula, rtol=1e-12, atol=1e-12)
    # central finite differences, coordinate by coordinate
    eps = 1e-6
    fd = torch.zeros_like(xd)
    for j in range(n):
        e = torch.zeros_like(xd)
        e[:, j] = eps
        fd[:, j] = (prior.log_prob_group(xd + e) - prior.log_prob_group(xd - e)) / (2 * eps)
    torch.testing.assert_close(x.grad, fd, rtol=1e-6, atol=1e-6)


def test_empty_group_contributes_zero():
    x = torch.zeros(4, 0)
    assert torch.all(InvGammaPrior().log_prob_group(x) == 0)
    assert torch.all(GaussianPrior().log_prob_group(x) == 0)


def test_make_prior():
    p = make_prior("invgamma", a=2.0, b=0.5)
    assert isinstance(p, InvGammaPrior) and p.a == 2.0 and p.b == 0.5
    assert isinstance(make_prior("gaussian", variance=0.1), GaussianPrior)
    assert set(PRIORS) == {"gaussian", "invgamma", "joint"}
    with pytest.raises(ConfigError, match="gaussian, invgamma, joint"):
        make_prior("laplace")
    with pytest.raises(ConfigError, match="does not take \\['variance'\\]"):
        make_prior("invgamma", variance=1.0)
    with pytest.raises(ValueError):
        GaussianPrior(0.0)
    with pytest.raises(ValueError):
        InvGammaPrior(a=-1.0)


def test_log_prob_sums_the_groups():
    torch.manual_seed(0)
    groups = {"0.C": torch.randn(3, 5), "0.bias": torch.randn(3, 2)}
    prior = GaussianPrior(0.3)
    torch.testing.assert_close(prior.log_prob(groups),
                               prior.log_prob_group(groups["0.C"]) + prior.log_prob_group(groups["0.bias"]))


def test_joint_prior_matches_scipy_normal_gamma_with_jacobian():
    """log p(x, u) with u = log λ: Σ_g [Σ log N(x_gk; 0, 1/λ_g) + log Gamma(λ_g; a, rate b) + u_g]."""
    a, b = 1.5, 0.2
    rng = np.random.default_rng(0)
    groups = {"w": torch.tensor(rng.normal(size=(4, 6))), "b": torch.tensor(rng.normal(size=(4, 2)))}
    prior = JointGammaPrior({"w": 6, "b": 2}, num_particles=4, a=a, b=b).double()
    with torch.no_grad():
        prior.log_precision.copy_(torch.tensor(rng.normal(size=(4, 2))))
    got = prior.log_prob(groups).detach().numpy()
    u = prior.log_precision.detach().numpy()
    ref = np.zeros(4)
    for g, (_name, x) in enumerate(groups.items()):
        lam = np.exp(u[:, g])
        ref += stats.norm.logpdf(x.numpy(), scale=1 / np.sqrt(lam)[:, None]).sum(1)
        ref += stats.gamma.logpdf(lam, a, scale=1 / b) + u[:, g]
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    assert prior.hyperparameters() == [prior.log_precision]


def test_joint_prior_precision_gradient_vanishes_at_the_conditional_mode():
    """∂/∂u log p = n/2 − λ‖x‖²/2 + a − bλ = 0 at λ* = (a + n/2) / (b + ‖x‖²/2) (the Gamma posterior mode of u)."""
    a, b = 1.0, 0.1
    x = torch.randn(3, 10, dtype=torch.float64)
    lam_star = (a + 5.0) / (b + 0.5 * x.square().sum(1))
    prior = JointGammaPrior({"x": 10}, num_particles=3, a=a, b=b).double()
    with torch.no_grad():
        prior.log_precision.copy_(lam_star.log()[:, None])
    prior.log_prob({"x": x}).sum().backward()
    torch.testing.assert_close(prior.log_precision.grad, torch.zeros(3, 1, dtype=torch.float64), atol=1e-10, rtol=0)
