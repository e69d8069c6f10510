"""K-Linear Kronecker flow (Huang, Touati, Vincent, Dziugaite, Lacoste & Courville, AISTATS 2020).

Paper: "Stochastic Neural Network with Kronecker Flow", ``papers/kronecker-flow.md``,
section 3.1. Per layer, with W of shape ``(n, p) = (in, out)``:

    W = M + A (E ∘ S) B,    E_ij ~ N(0, 1) i.i.d.,

A ``(in, in)`` and B ``(out, out)`` lower-triangular with unit diagonal (by masking),
S = softplus(ρ) > 0 ``(in, out)``. Property 1 (column-major vec):

    (P1) E vec(W) = vec(M),  Σ = (Bᵀ ⊗ A) diag(vec(S²)) (B ⊗ Aᵀ)   [= BᵀB ⊗ AAᵀ when S ≡ 1],
    (P2) det Σ = det(A)^{2p} det(B)^{2n} Π S_ij² = Π S_ij²  (unit-triangular A, B),
    (P3) Tr Σ = Σ_ij ((A∘A)(S∘S)(B∘B))_ij  (the marginal variances of W).

The prior is isotropic, N(Θ0, λ I) with λ = prior_sigma² (section 2.1); the paper centres
it at the random initialisation Θ0 (``prior_mean="init"``), the default here is Θ0 = 0
like the other baselines. The KL is then closed form from P2 and P3:

    KL = ½ [Tr Σ / λ + ‖M − Θ0‖² / λ − D + D log λ − Σ log S²],  D = in · out.

This is the variational twin of steinrl's ``kronecker`` prior layer (W = A Λ1 C Λ2 Bᵀ):
here the right factor multiplies as B (lower-triangular), exactly as in the paper.
Biases get a diagonal Gaussian posterior with the same prior. The β weight of the
paper's regulariser is 1 (plain ELBO); K-Nonlinear (section 3.2) is not implemented.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from steinrl.bayes.base import POSTERIORS, Dense, PosteriorSettings, VariationalPosterior, softplus_inverse
from steinrl.registry import positive, setting, settings_options

__all__ = ["KroneckerLinearLayer", "KroneckerFlowPosterior"]


def _unit_lower(raw: Tensor) -> Tensor:
    """tril(raw, −1) + I: lower-triangular with unit diagonal (masking, footnote 4)."""
    return torch.tril(raw, -1) + torch.eye(raw.shape[-1], device=raw.device, dtype=raw.dtype)


class KroneckerLinearLayer(nn.Module):
    """q(W) of one layer, W = M + A (E ∘ S) B (section 3.1).

    Parameters: ``mean`` M ``(in, out)``, ``rho`` ``(in, out)`` with S = softplus(ρ),
    ``a_raw (in, in)`` and ``b_raw (out, out)`` of which only the strictly-lower entries
    act (initialised to 0: the layer starts as a diagonal Gaussian).
    """

    def __init__(self, mean: Tensor, init_sigma: float) -> None:
        super().__init__()
        fan_in, fan_out = mean.shape
        self.mean = nn.Parameter(mean)
        self.rho = nn.Parameter(torch.full_like(mean, softplus_inverse(init_sigma)))
        self.a_raw = nn.Parameter(torch.zeros(fan_in, fan_in, dtype=mean.dtype))
        self.b_raw = nn.Parameter(torch.zeros(fan_out, fan_out, dtype=mean.dtype))

    def factors(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(A (in, in), S (in, out), B (out, out))``."""
        return _unit_lower(self.a_raw), F.softplus(self.rho), _unit_lower(self.b_raw)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """W = M + A (E ∘ S) B for n draws of E: ``(n, in, out)``."""
        a, s, b = self.factors()
        noise = torch.randn((n, *self.mean.shape), generator=generator, device=s.device, dtype=s.dtype)
        return self.mean + a @ (noise * s) @ b  # n in out

    def marginal_variance(self) -> Tensor:
        """Var W_ij = ((A∘A)(S∘S)(B∘B))_ij, ``(in, out)`` -- the diagonal of Σ (P3)."""
        a, s, b = self.factors()
        return a.square() @ s.square() @ b.square()

    def kl(self, prior_variance: float, prior_mean: Tensor | float = 0.0) -> Tensor:
        """KL(q || N(prior_mean, λ I)), closed form via P2 and P3."""
        dim = self.mean.numel()
        trace = self.marginal_variance().sum()
        log_det = 2.0 * F.softplus(self.rho).log().sum()
        squared_distance = (self.mean - prior_mean).square().sum()
        return 0.5 * ((trace + squared_distance) / prior_variance - dim + dim * math.log(prior_variance) - log_det)


@dataclass(frozen=True)
class KFlowSettings(PosteriorSettings):
    """The ``kflow`` posterior's options (the bandits' ``posterior`` section)."""

    prior_sigma: float = setting(1.0, "√λ of the isotropic prior N(Θ0, λ I) (section 2.1).", check=positive)
    prior_mean: str = setting(
        "zero", "Θ0: 'zero', or 'init' = the initial means (the paper's choice).",
        choices=("zero", "init"))
    init_sigma: float = setting(0.01, "Initial S = softplus(ρ) of every weight, and initial bias std.", check=positive)


@POSTERIORS.register("kflow")
class KroneckerFlowPosterior(VariationalPosterior):
    """K-Linear posterior over every weight matrix, diagonal Gaussian over the biases.

    Parameters: ``layers[i]`` (:class:`KroneckerLinearLayer`), ``biases[i]``
    (:class:`~steinrl.bayes.base.DiagonalGaussian`); buffers ``prior_mean_<i>`` (Θ0).
    """

    Settings = KFlowSettings
    options = settings_options(Settings)

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu", *,
                 prior_sigma: float = 1.0, prior_mean: str = "zero", init_sigma: float = 0.01,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(in_dim, hidden, out_dim, activation)
        if prior_mean not in ("zero", "init"):
            raise ValueError(f"unknown prior_mean {prior_mean!r}; choices: zero, init")
        self.prior_sigma = prior_sigma
        means = self.initial_weight_means(generator)
        self.layers = nn.ModuleList(KroneckerLinearLayer(mean, init_sigma) for mean in means)
        self.biases = self.initial_bias_posteriors(init_sigma)
        for i, mean in enumerate(means):
            self.register_buffer(f"prior_mean_{i}", mean.clone() if prior_mean == "init" else torch.zeros_like(mean))

    def sample(self, n: int, generator: torch.Generator | None = None) -> Dense:
        """n draws: per layer ``(W (n, in, out), b (n, out))``."""
        return [(layer.sample(n, generator), bias.sample(n, generator))
                for layer, bias in zip(self.layers, self.biases)]

    def kl(self) -> Tensor:
        """KL(q || p), closed form (Property 1; Gaussian prior on the biases too)."""
        variance = self.prior_sigma ** 2
        weights = sum(layer.kl(variance, getattr(self, f"prior_mean_{i}")) for i, layer in enumerate(self.layers))
        return weights + sum(bias.kl(self.prior_sigma) for bias in self.biases)
