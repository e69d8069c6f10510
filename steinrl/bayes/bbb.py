"""Bayes by Backprop (Blundell, Cornebise, Kavukcuoglu & Wierstra, ICML 2015).

Paper: "Weight Uncertainty in Neural Networks", notes in ``papers/bayes-by-backprop-notes.md``.

- Posterior: diagonal Gaussian, w = μ + softplus(ρ) ∘ ε, ε ~ N(0, I) (the notes'
  reparametrisation function r(θ, ε)), on every weight and bias.
- Prior ``"scale_mixture"`` (eq. 7): p(w) = Π_j π N(w_j | 0, σ1²) + (1 − π) N(w_j | 0, σ2²),
  σ1 > σ2. The notes give no values; the defaults π = 1/2, σ1 = e⁰, σ2 = e⁻⁶ come from
  the paper's search grid (π ∈ {1/4, 1/2, 3/4}, −log σ1 ∈ {0, 1, 2}, −log σ2 ∈ {6, 7, 8}).
  The KL has no closed form: it is the Monte Carlo estimate of the notes' f(θ, w) terms,
  mean over draws of log q(w) − log p(w), on the same draws as the likelihood (Algorithm 1).
- Prior ``"gaussian"``: N(0, σ_p² I); the KL is closed form, and training uses the local
  reparameterisation trick (Kingma, Salimans & Welling 2015): each layer's
  pre-activation is sampled directly, z ~ N(h μ_W + μ_b, h² σ_W² + σ_b²), with noise
  independent per example (lower-variance gradients, same expected ELBO).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from steinrl.bayes.base import POSTERIORS, Dense, DiagonalGaussian, PosteriorSettings, VariationalPosterior
from steinrl.core.activations import ACTIVATIONS
from steinrl.core.ensemble import mlp_forward
from steinrl.registry import at_least_one, open_unit_interval, positive, setting, settings_options

__all__ = ["BayesByBackprop", "scale_mixture_log_prob"]

def scale_mixture_log_prob(w: Tensor, pi: float, sigma1: float, sigma2: float) -> Tensor:
    """log of eq. (7) per entry: log[π N(w | 0, σ1²) + (1 − π) N(w | 0, σ2²)], same shape as w."""
    components = torch.stack([
        math.log(pi) - math.log(sigma1) - 0.5 * (w / sigma1).square(),
        math.log1p(-pi) - math.log(sigma2) - 0.5 * (w / sigma2).square(),
    ])
    return torch.logsumexp(components, dim=0) - 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class BBBSettings(PosteriorSettings):
    """The ``bbb`` posterior's options (the bandits' ``posterior`` section)."""

    prior: str = setting(
        "scale_mixture", "Weight prior: the scale mixture of eq. (7), or a Gaussian N(0, σ_p²).",
        choices=("scale_mixture", "gaussian"))
    prior_sigma: float = setting(1.0, "σ_p of the Gaussian prior (prior=gaussian).", check=positive)
    mixture_pi: float = setting(0.5, "π of the scale-mixture prior, eq. (7).", check=open_unit_interval)
    mixture_sigma1: float = setting(1.0, "σ1, the wide component of eq. (7) (−log σ1 = 0).", check=positive)
    mixture_sigma2: float = setting(
        math.exp(-6.0), "σ2, the narrow component of eq. (7) (−log σ2 = 6).",
        check=positive)
    local_reparam: bool = setting(True, "Local reparameterisation trick in elbo_loss (Gaussian prior only).")
    init_sigma: float = setting(0.01, "Initial posterior std softplus(ρ) of every weight and bias.", check=positive)
    kl_samples: int = setting(8, "Monte Carlo draws of kl() under the scale-mixture prior.", check=at_least_one)


@POSTERIORS.register("bbb")
class BayesByBackprop(VariationalPosterior):
    """Diagonal-Gaussian posterior with a scale-mixture (eq. 7) or Gaussian prior.

    Parameters: per layer a :class:`~steinrl.bayes.base.DiagonalGaussian` for W
    ``(in, out)`` and one for b ``(out,)`` (``weights[i]``, ``biases[i]``).
    """

    Settings = BBBSettings
    options = settings_options(Settings)

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu", *,
                 prior: str = "scale_mixture", prior_sigma: float = 1.0, mixture_pi: float = 0.5,
                 mixture_sigma1: float = 1.0, mixture_sigma2: float = math.exp(-6.0), local_reparam: bool = True,
                 init_sigma: float = 0.01, kl_samples: int = 8, generator: torch.Generator | None = None) -> None:
        super().__init__(in_dim, hidden, out_dim, activation)
        if prior not in ("scale_mixture", "gaussian"):
            raise ValueError(f"unknown prior {prior!r}; choices: scale_mixture, gaussian")
        if prior == "scale_mixture" and not mixture_sigma1 > mixture_sigma2:
            raise ValueError("eq. (7) needs mixture_sigma1 > mixture_sigma2")
        self.prior = prior
        self.prior_sigma = prior_sigma
        self.mixture = (mixture_pi, mixture_sigma1, mixture_sigma2)
        self.local_reparam = local_reparam
        self.kl_samples = kl_samples
        means = self.initial_weight_means(generator)
        self.weights = nn.ModuleList(DiagonalGaussian(mean, init_sigma) for mean in means)
        self.biases = self.initial_bias_posteriors(init_sigma)

    def _gaussians(self) -> list[DiagonalGaussian]:
        """Every weight's then every bias' Gaussian, layer order."""
        return [*self.weights, *self.biases]  # type: ignore[list-item]

    def _sample_with_noise(self, n: int, generator: torch.Generator | None) -> tuple[Dense, list[Tensor]]:
        """Weight draws and the ε behind them (ε of weights then biases, layer order)."""
        dense, noises = [], []
        for w, b in zip(self.weights, self.biases):
            eps_w, eps_b = w.noise(n, generator), b.noise(n, generator)
            dense.append((w.mean + w.std * eps_w, b.mean + b.std * eps_b))
            noises += [eps_w, eps_b]
        return dense, noises[0::2] + noises[1::2]

    def sample(self, n: int, generator: torch.Generator | None = None) -> Dense:
        """n draws: per layer ``(W (n, in, out), b (n, out))``."""
        return self._sample_with_noise(n, generator)[0]

    def _monte_carlo_kl(self, dense: Dense, noises: list[Tensor]) -> Tensor:
        """mean over the n draws of log q(w) − log p(w) (scale-mixture prior, eq. 7)."""
        values = [w for w, _ in dense] + [b for _, b in dense]
        log_q = torch.stack([(-0.5 * eps.square() - g.std.log() - 0.5 * math.log(2.0 * math.pi)).flatten(1).sum(1)
                             for eps, g in zip(noises, self._gaussians())]).sum(0)  # n
        log_p = torch.stack([scale_mixture_log_prob(v, *self.mixture).flatten(1).sum(1) for v in values]).sum(0)  # n
        return (log_q - log_p).mean()

    def kl(self, generator: torch.Generator | None = None) -> Tensor:
        """KL(q || p): closed form under the Gaussian prior; under the scale mixture a
        Monte Carlo estimate over ``kl_samples`` draws (unbiased, not exact)."""
        if self.prior == "gaussian":
            return torch.stack([g.kl(self.prior_sigma) for g in self._gaussians()]).sum()
        return self._monte_carlo_kl(*self._sample_with_noise(self.kl_samples, generator))

    def _local_reparam_predict(self, x: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
        """``x (B, in)`` -> ``(n, B, out)``, every pre-activation drawn from its Gaussian marginal."""
        act = ACTIVATIONS.get(self.activation)
        h = x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            mean = h @ w.mean + b.mean  # (n,) B out
            var = h.square() @ w.std.square() + b.std.square()
            shape = (n, *mean.shape[-2:])
            eps = torch.randn(shape, generator=generator, device=mean.device, dtype=mean.dtype)
            h = mean + var.sqrt() * eps  # n B out
            if i != last:
                h = act(h)
        return h

    def predictions_and_kl(self, x: Tensor, n_samples: int,
                           generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """Gaussian prior: local reparameterisation + closed-form KL (if ``local_reparam``);
        scale mixture: the same weight draws for the likelihood and the Monte Carlo KL."""
        if self.prior == "gaussian":
            pred = (self._local_reparam_predict(x, n_samples, generator) if self.local_reparam
                    else self.predict(x, n_samples, generator))
            return pred, self.kl()
        dense, noises = self._sample_with_noise(n_samples, generator)
        return mlp_forward(dense, x, self.activation), self._monte_carlo_kl(dense, noises)
