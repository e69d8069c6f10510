"""Radial–directional posteriors, RDP (Oh, Adamczewski & Park 2019).

Paper: "The Radial and Directional Posteriors for Bayesian Deep Learning",
``papers/radial-directional-posteriors.md``. Row-wise factorisation (section 2): row r of
the paper's W^(l) ``(n_l, n_{l−1})`` holds the incoming weights of unit r, i.e. column r
of steinrl's W ``(in, out)``; it is written w_r = ‖w_r‖ · (w_r / ‖w_r‖), a norm times a
direction on the sphere S^{d−1}, d = fan-in, independent under q and p.

Directional density (eq. 2): q = vMF(μ_r, κ) with one concentration κ per layer and a
mean direction per row; vMF(x | μ, κ) = C_d(κ) exp(κ μᵀx),
C_d(κ) = κ^{d/2−1} / ((2π)^{d/2} I_{d/2−1}(κ)). Prior vMF(μ_p,r, κ_p): κ_p = 0 (default)
is the uniform distribution on the sphere; for κ_p > 0 the prior mean directions are
learned with the ELBO (eq. 1 maximises over the prior parameters θ as well). KL (section 3):

    KL = (κ_q − κ_p μ_pᵀμ_q) A_d(κ_q) + log C_d(κ_q) − log C_d(κ_p),  A_d = I_{d/2} / I_{d/2−1},

with A_d(κ) the average of the bounds of Theorem 1 (eq. 4), as the paper does, and
log C_d by Gauss–Legendre quadrature of Poisson's integral (the paper does not say how
it evaluates C_d; this needs no Bessel routine, is differentiable and runs on any device).
Samples: Wood's (1994) rejection sampler, batched, with the gradient w.r.t. κ taken
through the accepted proposal (the reparameterisation of Naesseth et al. 2017 without its
rejection-correction term -- an approximation, small when acceptance is high) and the
gradient w.r.t. μ exact, through the Householder reflection e1 -> μ.

Radial density (eq. 3): ‖w_r‖ = s z̄_r, prior s ~ C⁺(γ) (global), z̄_r ~ C⁺(1) (local).
The paper takes the posterior and its KL from Louizos, Ullrich & Welling (2017), group
horseshoe: each half-Cauchy C⁺(k) is written as √(a·b) with a ~ Gamma(½, rate 1/k²)
and b ~ InvGamma(½, scale 1), and q is log-normal on each of a, b (per layer for s, per
row for z̄). Then log ‖w_r‖ = ½(log s_a + log s_b + log z_a,r + log z_b,r) is Gaussian, and
the KL -- of the augmented variables, an upper bound on the KL of the norms -- is closed
form (:func:`kl_lognormal_gamma`, :func:`kl_lognormal_inverse_gamma`; derived here with
the rate 1/k², which makes √(a b) exactly C⁺(k)). Biases: diagonal Gaussian, Gaussian prior.
The paper's "double grouping" (row and column factors multiplied) is not implemented.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from steinrl.bayes.base import POSTERIORS, Dense, PosteriorSettings, VariationalPosterior
from steinrl.registry import non_negative, positive, setting, settings_options

__all__ = [
    "RadialDirectionalPosterior",
    "RadialDirectionalLayer",
    "bessel_ratio",
    "log_vmf_normaliser",
    "sample_vmf",
    "kl_vmf",
    "kl_lognormal_gamma",
    "kl_lognormal_inverse_gamma",
]

_GAUSS_LEGENDRE = np.polynomial.legendre.leggauss(64)  # nodes, weights on [−1, 1]
_WINDOW_SDS = 12.0  # half-width of the quadrature window, in Laplace standard deviations


def bessel_ratio(nu: float, z: Tensor) -> Tensor:
    """I_ν(z) / I_{ν−1}(z) ≈ (B_0(ν, z) + B_2(ν, z)) / 2, the bounds of Theorem 1 (eq. 4), ν ≥ ½.

    B_α(ν, z) = z / (δ_α + √(δ_α² + z²)), δ_α = (ν − ½) + λ / (2√(λ² + z²)), λ = ν + (α − 1)/2.
    """
    def bound(alpha: int) -> Tensor:
        lam = nu + (alpha - 1) / 2
        delta = (nu - 0.5) + lam / (2.0 * (lam ** 2 + z.square()).sqrt())
        return z / (delta + (delta.square() + z.square()).sqrt())

    return 0.5 * (bound(0) + bound(2))


def log_vmf_normaliser(d: int, kappa: Tensor) -> Tensor:
    """log C_d(κ) of eq. 2 (elementwise over ``kappa``), d ≥ 2.

    Poisson's integral I_ν(κ) = (κ/2)^ν / (√π Γ(ν + ½)) ∫_0^π e^{κ cos φ} sin^{2ν} φ dφ
    with ν = d/2 − 1 gives log C_d(κ) = lgamma((d−1)/2) − log 2 − ((d−1)/2) log π − log J(κ),
    J(κ) = ∫_0^π exp(κ cos φ + (d − 2) log sin φ) dφ, computed by 64-point Gauss–Legendre on
    the window φ* ± 12 sd around the integrand's peak (Laplace sd), clipped to [0, π].
    """
    if d < 2:
        raise ValueError(f"the vMF needs d >= 2, got {d}")
    k = kappa.double()
    m = float(d - 2)
    with torch.no_grad():  # the window: where the integrand lives (its bounds carry no gradient)
        kd = k.clamp_min(1e-30)
        cos_peak = 2.0 * kd / (m + (m * m + 4.0 * kd.square()).sqrt())  # root of κ sin²φ = (d−2) cos φ
        curvature = kd * cos_peak + (kd / cos_peak if m > 0 else 0.0)  # −g''(φ*)
        peak, sd = cos_peak.clamp(-1.0, 1.0).acos(), curvature.rsqrt()
        low = (peak - _WINDOW_SDS * sd).clamp_min(0.0)
        high = (peak + _WINDOW_SDS * sd).clamp_max(math.pi)
        nodes = torch.as_tensor(_GAUSS_LEGENDRE[0], device=k.device)
        half_width = (0.5 * (high - low)).unsqueeze(-1)
        phi = low.unsqueeze(-1) + half_width * (nodes + 1.0)  # ... Q
        log_weights = (torch.as_tensor(_GAUSS_LEGENDRE[1], device=k.device) * half_width).log()
    log_integrand = k.unsqueeze(-1) * phi.cos() + m * phi.sin().log()
    log_j = torch.logsumexp(log_integrand + log_weights, dim=-1)
    constant = math.lgamma((d - 1) / 2) - math.log(2.0) - (d - 1) / 2 * math.log(math.pi)
    return (constant - log_j).to(kappa.dtype)


def kl_vmf(loc_q: Tensor, kappa_q: Tensor, loc_p: Tensor | None, kappa_p: float) -> Tensor:
    """KL(vMF(μ_q, κ_q) || vMF(μ_p, κ_p)) per row (section 3): ``loc_q (..., d)`` unit rows -> ``(...)``.

    ``loc_p`` None (or κ_p = 0) is the uniform prior. A_d(κ_q) from Theorem 1 (eq. 4).
    """
    d = loc_q.shape[-1]
    alignment = (loc_q * loc_p).sum(-1) if loc_p is not None else torch.zeros_like(loc_q[..., 0])
    log_c_p = log_vmf_normaliser(d, torch.tensor(float(kappa_p), dtype=loc_q.dtype, device=loc_q.device))
    return ((kappa_q - kappa_p * alignment) * bessel_ratio(d / 2, kappa_q)
            + log_vmf_normaliser(d, kappa_q) - log_c_p)


def _wood_proposals(kappa: Tensor, d: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """Wood's (1994) rejection step for every entry of ``kappa`` (no gradient).

    Returns the accepted ε ~ Beta((d−1)/2, (d−1)/2) behind w = μᵀz (float64, shape of
    ``kappa``) and a uniform tangent direction on S^{d−2} ``(*kappa.shape, d−1)``. A
    proposal is one standard normal g ∈ R^d: ε = (1 + g_1/‖g‖)/2 and g_{2:}/‖g_{2:}‖ are
    independent with exactly these laws. Loops over rejection rounds, not over samples.
    """
    m1 = d - 1
    k = kappa.detach().double().reshape(-1)
    if not bool(torch.isfinite(k).all() and (k > 0).all()):
        raise ValueError("vMF concentrations must be finite and > 0")
    b = m1 / (2.0 * k + (4.0 * k.square() + m1 * m1).sqrt())
    x0 = (1.0 - b) / (1.0 + b)
    c = k * x0 + m1 * torch.log1p(-x0.square())
    eps = torch.empty_like(k)
    tangent = torch.empty(k.numel(), m1, dtype=k.dtype, device=k.device)
    pending = torch.arange(k.numel(), device=k.device)
    while pending.numel():
        g = torch.randn(pending.numel(), d, generator=generator, dtype=k.dtype, device=k.device)
        e = 0.5 * (1.0 + g[:, 0] / g.norm(dim=1))
        bp, x0p = b[pending], x0[pending]
        w = (1.0 - (1.0 + bp) * e) / (1.0 - (1.0 - bp) * e)
        log_u = torch.rand(pending.numel(), generator=generator, dtype=k.dtype, device=k.device).log()
        accept = k[pending] * w + m1 * torch.log1p(-x0p * w) - c[pending] >= log_u
        eps[pending[accept]] = e[accept]
        tangent[pending[accept]] = torch.nn.functional.normalize(g[accept, 1:], dim=1)
        pending = pending[~accept]
    return eps.reshape(kappa.shape), tangent.reshape(*kappa.shape, m1)


def sample_vmf(loc: Tensor, kappa: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
    """n draws from vMF(μ, κ) for every row: ``loc (..., d)`` unit rows, ``kappa`` broadcastable to
    ``loc.shape[:-1]`` -> ``(n, ..., d)``. Wood (1994), reparameterised (see the module doc)."""
    d = loc.shape[-1]
    if d < 2:
        raise ValueError(f"the vMF needs d >= 2, got {d}")
    kappa_rows = kappa.double().expand(n, *loc.shape[:-1])  # n ...
    eps, tangent = _wood_proposals(kappa_rows, d, generator)
    b = (d - 1) / (2.0 * kappa_rows + (4.0 * kappa_rows.square() + (d - 1) ** 2).sqrt())
    denominator = 1.0 - (1.0 - b) * eps
    w = (1.0 - (1.0 + b) * eps) / denominator  # μᵀz, differentiable in κ
    # √(1 − w²) = 2 √(b ε (1 − ε)) / denominator: no cancellation, finite gradient even where w = ±1
    radius = 2.0 * b.sqrt() * (eps * (1.0 - eps)).sqrt() / denominator
    z = torch.cat([w.unsqueeze(-1), radius.unsqueeze(-1) * tangent], dim=-1).to(loc.dtype)  # n ... d, around e1
    e1 = torch.zeros(d, dtype=loc.dtype, device=loc.device)
    e1[0] = 1.0
    u = e1 - loc
    u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # Householder H = I − 2uuᵀ maps e1 to μ
    return z - 2.0 * (z * u).sum(-1, keepdim=True) * u


def kl_lognormal_gamma(mean: Tensor, log_var: Tensor, rate: float) -> Tensor:
    """KL(LogNormal(m, v) || Gamma(shape ½, rate β)), elementwise, closed form:
    −m/2 − ½ log(2πe v) − ½ log β + ½ log π + β e^{m + v/2}."""
    var = log_var.exp()
    return (-0.5 * mean - 0.5 * (math.log(2.0 * math.pi) + 1.0 + log_var) - 0.5 * math.log(rate)
            + 0.5 * math.log(math.pi) + rate * (mean + 0.5 * var).exp())


def kl_lognormal_inverse_gamma(mean: Tensor, log_var: Tensor) -> Tensor:
    """KL(LogNormal(m, v) || InvGamma(shape ½, scale 1)), elementwise, closed form:
    m/2 − ½ log(2πe v) + ½ log π + e^{v/2 − m}."""
    var = log_var.exp()
    return (0.5 * mean - 0.5 * (math.log(2.0 * math.pi) + 1.0 + log_var) + 0.5 * math.log(math.pi)
            + (0.5 * var - mean).exp())


class RadialDirectionalLayer(nn.Module):
    """q over one layer's W ``(in, out)``: column r = ‖w_r‖ · direction_r.

    Parameters: ``loc (out, in)`` (direction means μ_r = loc_r / ‖loc_r‖), ``log_kappa``
    (scalar, κ shared by the layer), ``global_mean``/``global_log_var`` ``(2,)`` for
    (log s_a, log s_b), ``local_mean``/``local_log_var`` ``(2, out)`` for (log z_a,r, log z_b,r);
    ``prior_loc (out, in)`` if κ_p > 0.
    """

    def __init__(self, weight: Tensor, init_kappa: float, init_log_variance: float, prior_kappa: float) -> None:
        super().__init__()
        fan_in, fan_out = weight.shape
        self.loc = nn.Parameter(weight.T.clone())
        self.log_kappa = nn.Parameter(torch.tensor(math.log(init_kappa)))
        self.global_mean = nn.Parameter(torch.zeros(2))
        self.global_log_var = nn.Parameter(torch.full((2,), init_log_variance))
        self.local_mean = nn.Parameter(weight.norm(dim=0).log().expand(2, fan_out).clone())  # median ‖w_r‖ = init
        self.local_log_var = nn.Parameter(torch.full((2, fan_out), init_log_variance))
        self.prior_kappa = prior_kappa
        self.prior_loc = nn.Parameter(weight.T.clone()) if prior_kappa > 0 else None

    def directions(self) -> Tensor:
        """μ_r, unit rows ``(out, in)``."""
        return torch.nn.functional.normalize(self.loc, dim=-1)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """W draws ``(n, in, out)``."""
        directions = sample_vmf(self.directions(), self.log_kappa.exp(), n, generator)  # n out in
        noise_global = torch.randn(n, 2, generator=generator, dtype=self.loc.dtype, device=self.loc.device)
        noise_local = torch.randn(n, *self.local_mean.shape, generator=generator, dtype=self.loc.dtype,
                                  device=self.loc.device)
        log_s = self.global_mean + (0.5 * self.global_log_var).exp() * noise_global  # n 2
        log_z = self.local_mean + (0.5 * self.local_log_var).exp() * noise_local  # n 2 out
        log_norm = 0.5 * (log_s.sum(-1, keepdim=True) + log_z.sum(1))  # n out
        return (log_norm.exp().unsqueeze(-1) * directions).mT  # n in out

    def kl(self, global_scale: float) -> Tensor:
        """Directional (vMF) plus radial (log-normal vs Gamma / InvGamma) KL of the layer."""
        prior_loc = torch.nn.functional.normalize(self.prior_loc, dim=-1) if self.prior_loc is not None else None
        directional = kl_vmf(self.directions(), self.log_kappa.exp(), prior_loc, self.prior_kappa).sum()
        radial = (kl_lognormal_gamma(self.global_mean[0], self.global_log_var[0], global_scale ** -2)
                  + kl_lognormal_inverse_gamma(self.global_mean[1], self.global_log_var[1])
                  + kl_lognormal_gamma(self.local_mean[0], self.local_log_var[0], 1.0).sum()
                  + kl_lognormal_inverse_gamma(self.local_mean[1], self.local_log_var[1]).sum())
        return directional + radial


@dataclass(frozen=True)
class RDPSettings(PosteriorSettings):
    """The ``rdp`` posterior's options (the bandits' ``posterior`` section)."""

    prior_kappa: float = setting(
        0.0, "κ_p of the vMF direction prior; 0 = uniform on the sphere, > 0 learns the prior mean directions (eq. "
        "1).",
        check=non_negative)
    global_scale: float = setting(1.0, "γ of the global half-Cauchy C⁺(γ) on the norms (eq. 3).", check=positive)
    init_concentration: float = setting(
        10.0, "Initial κ_q of a layer, in units of its fan-in d (κ = value · d).",
        check=positive)
    init_log_variance: float = setting(
        -6.0, "Initial log σ² of the four log-normal radial factors.",
        check=lambda v: None if v < 10 else "must be < 10")
    bias_prior_sigma: float = setting(1.0, "σ of the Gaussian prior N(0, σ²) on the biases.", check=positive)
    init_sigma: float = setting(0.01, "Initial posterior std of the biases.", check=positive)


@POSTERIORS.register("rdp")
class RadialDirectionalPosterior(VariationalPosterior):
    """RDP over every weight matrix (row-wise grouping), diagonal Gaussian over the biases.

    Parameters: ``layers[i]`` (:class:`RadialDirectionalLayer`), ``biases[i]``. Every
    fan-in must be >= 2 (a direction in R^1 is only a sign).
    """

    Settings = RDPSettings
    options = settings_options(Settings)

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu", *,
                 prior_kappa: float = 0.0, global_scale: float = 1.0, init_concentration: float = 10.0,
                 init_log_variance: float = -6.0, bias_prior_sigma: float = 1.0, init_sigma: float = 0.01,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(in_dim, hidden, out_dim, activation)
        if min(fan_in for fan_in, _ in self.layer_shapes) < 2:
            raise ValueError(f"rdp needs every fan-in >= 2, got layers {self.layer_shapes}")
        self.global_scale = global_scale
        self.bias_prior_sigma = bias_prior_sigma
        self.layers = nn.ModuleList(
            RadialDirectionalLayer(weight, init_concentration * weight.shape[0], init_log_variance, prior_kappa)
            for weight in self.initial_weight_means(generator))
        self.biases = self.initial_bias_posteriors(init_sigma)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Dense:
        """n draws: per layer ``(W (n, in, out), b (n, out))``."""
        return [(layer.sample(n, generator), bias.sample(n, generator))
                for layer, bias in zip(self.layers, self.biases)]

    def kl(self) -> Tensor:
        """KL(q || p): vMF terms (section 3; A_d by Theorem 1), radial terms closed form."""
        return (sum(layer.kl(self.global_scale) for layer in self.layers)
                + sum(bias.kl(self.bias_prior_sigma) for bias in self.biases))
