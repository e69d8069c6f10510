"""BADAM: Bayesian learning via Adam (Salas, Kessler, Zohren & Roberts 2018).

Paper: "Practical Bayesian Neural Networks via Adaptive Subgradient Optimization
Methods", ``papers/badam-bayesian-adam.md``.

Training is plain Adam (Algorithm 2) on the loss f_t -- the minibatch *mean* negative
log-likelihood at the current weights θ_t (eq. 5, 7; f is an average over examples,
eq. 12 multiplies it back by N). Adam's bias-corrected second moment v_t (eq. 4) stands
in for the curvature, ∇²f ≈ V_t^{1/2} = diag(√v_t) (eq. 10), and a Laplace approximation
with the Gaussian prior N(0, σ² I) (eq. 6) gives the posterior of eq. 14 / the output
of Algorithm 2, per weight:

    precision = N √v_t + 1/σ²,
    q(θ) = N( (N √v_t / precision) · θ_{t+1},  1 / precision ).

N is the number of examples (eq. 12), or the section-4 heuristic N = t × batch size
(option ``n_rule``). Before the first step (v = 0) q is the prior. Prior σ defaults to
0.1 (appendix C, bandits on real data; 0.2 on the wheel bandit, appendix C.2).

The curvature is √v_t, the bias-corrected EWMA of Algorithm 2 (the authors' TF code
absorbs the bias correction into the step size and reads the uncorrected v; the two
agree once β2^t is small). Dropout, which the paper trains with, is not included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from steinrl.bayes.base import (
    POSTERIORS,
    Dense,
    LogLikelihood,
    PosteriorSettings,
    VariationalPosterior,
    kl_diagonal_gaussians,
)
from steinrl.core.ensemble import mlp_forward
from steinrl.registry import open_unit_interval, positive, setting, settings_options

__all__ = ["BADAM", "BadamPosterior"]


class BADAM(torch.optim.Adam):
    """Adam (Algorithm 2: bias-corrected m_t, v_t; θ_{t+1} = θ_t − η m̂_t / (√v̂_t + ε)) that
    also reads off the posterior of eq. 14 for any of its parameters.

    :param prior_sigma: σ of the prior N(0, σ² I) (eq. 6), per param group.
    Other arguments as :class:`torch.optim.Adam`.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, prior_sigma: float = 0.1) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps)
        self.defaults["prior_sigma"] = prior_sigma
        for group in self.param_groups:
            group.setdefault("prior_sigma", prior_sigma)

    def curvature(self, param: Tensor) -> Tensor:
        """√v̂_t (eq. 10's V_t^{1/2}), bias-corrected (eq. 4); zeros before the first step."""
        state = self.state.get(param, {})
        if "exp_avg_sq" not in state:
            return torch.zeros_like(param)
        beta2 = self._group_of(param)["betas"][1]
        return (state["exp_avg_sq"] / (1.0 - beta2 ** float(state["step"]))).sqrt()

    def steps(self) -> int:
        """t, the number of optimizer steps taken (0 before the first)."""
        return max((int(state["step"]) for state in self.state.values() if "step" in state), default=0)

    @torch.no_grad()
    def posterior(self, param: Tensor, n_data: float) -> tuple[Tensor, Tensor]:
        """``(mean, std)`` of eq. 14 for ``param`` (same shape), with N = ``n_data``."""
        likelihood_precision = n_data * self.curvature(param)
        precision = likelihood_precision + self._group_of(param)["prior_sigma"] ** -2
        return likelihood_precision / precision * param, precision.rsqrt()

    def _group_of(self, param: Tensor) -> dict[str, Any]:
        for group in self.param_groups:
            if any(p is param for p in group["params"]):
                return group
        raise KeyError("parameter is not optimised by this BADAM")


@dataclass(frozen=True)
class BadamSettings(PosteriorSettings):
    """The ``badam`` posterior's options (the bandits' ``posterior`` section)."""

    prior_sigma: float = setting(0.1, "σ of the prior N(0, σ²) (eq. 6; appendix C: 0.1, wheel bandit 0.2).",
                                 check=positive)
    beta1: float = setting(0.9, "Adam's β1 (Algorithm 2).", check=open_unit_interval)
    beta2: float = setting(0.999, "Adam's β2 (Algorithm 2; the EWMA behind the curvature).",
                           check=open_unit_interval)
    eps: float = setting(1e-8, "Adam's ε (Algorithm 2).", check=positive)
    n_rule: str = setting("data", "N of eq. 14: 'data' = the data-set size given to elbo_loss (eq. 12), 'seen' = "
                          "steps × batch size (section 4 heuristic).", choices=("data", "seen"))


@POSTERIORS.register("badam")
class BadamPosterior(VariationalPosterior):
    """An MLP trained by :class:`BADAM`, with the eq.-14 posterior over its weights.

    Parameters: the point weights θ, per layer ``weights[i] (in, out)``, ``biases[i] (out,)``.
    Use ``opt = posterior.make_optimizer(lr)``, then per minibatch
    ``posterior.elbo_loss(...).backward(); opt.step()``; :meth:`sample` reads q from ``opt``.
    """

    Settings = BadamSettings
    options = settings_options(Settings)
    #: Online, N of eq. 14 is the paper's section-4 heuristic N = t × batch size, "experimentally
    #: successful" where "a strict interpretation of N as the number of points does not allow for
    #: learning in an online scenario".
    online_defaults = {"n_rule": "seen"}
    #: In regression on standardised data the default prior σ = 0.1 (the bandit appendix) shrinks
    #: eq. 14's mean by 1/σ² = 100 against N·√v, which pulled every prediction to the target mean
    #: on yacht; N(0, 1) there, as BBB-Gaussian / kflow.
    regression_defaults = {"prior_sigma": 1.0}
    #: elbo_loss is the mean NLL per example (the loss BADAM descends)
    loss_per_example = True

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu", *,
                 prior_sigma: float = 0.1, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 n_rule: str = "data", generator: torch.Generator | None = None) -> None:
        super().__init__(in_dim, hidden, out_dim, activation)
        if n_rule not in ("data", "seen"):
            raise ValueError(f"unknown n_rule {n_rule!r}; choices: data, seen")
        self.prior_sigma = prior_sigma
        self.betas = (beta1, beta2)
        self.eps = eps
        self.n_rule = n_rule
        self.weights = nn.ParameterList(self.initial_weight_means(generator))
        self.biases = nn.ParameterList(torch.zeros(fan_out) for _, fan_out in self.layer_shapes)
        self.optimizer: BADAM | None = None
        #: Data-set size and minibatch size of the latest elbo_loss call (they set N).
        self.n_data = 0.0
        self.batch_size = 0

    def make_optimizer(self, lr: float = 1e-3) -> BADAM:
        """The BADAM optimizer over θ; :meth:`sample` reads the posterior from it."""
        self.optimizer = BADAM(self.parameters(), lr=lr, betas=self.betas, eps=self.eps,
                               prior_sigma=self.prior_sigma)
        return self.optimizer

    def effective_n(self) -> float:
        """N of eq. 14 under ``n_rule``."""
        if self.n_rule == "data":
            return self.n_data
        return float(self.optimizer.steps() * self.batch_size) if self.optimizer is not None else 0.0

    def moments(self) -> list[tuple[Tensor, Tensor]]:
        """``(mean, std)`` of eq. 14 for every parameter tensor, weights then biases of each layer."""
        params = [p for pair in zip(self.weights, self.biases) for p in pair]
        if self.optimizer is None:  # v = 0: q is the prior
            return [(torch.zeros_like(p), torch.full_like(p, self.prior_sigma)) for p in params]
        n = self.effective_n()
        return [self.optimizer.posterior(p, n) for p in params]

    def sample(self, n: int, generator: torch.Generator | None = None) -> Dense:
        """n draws from eq. 14 (no gradient): per layer ``(W (n, in, out), b (n, out))``."""
        draws = [mean + std * torch.randn((n, *mean.shape), generator=generator, device=mean.device,
                                          dtype=mean.dtype) for mean, std in self.moments()]
        return list(zip(draws[0::2], draws[1::2]))

    def kl(self) -> Tensor:
        """KL(q || N(0, σ² I)) of the eq.-14 Gaussian, closed form (not part of BADAM's training)."""
        return torch.stack([kl_diagonal_gaussians(mean, std, self.prior_sigma) for mean, std in self.moments()]).sum()

    def elbo_loss(self, x: Tensor, y: Tensor, log_likelihood: LogLikelihood, n_data: int, n_samples: int = 1,
                  generator: torch.Generator | None = None) -> Tensor:
        """The loss BADAM descends -- not an ELBO: f_t = −(1/B) Σ_batch log p(y | x, θ_t) at the
        point weights (eq. 5, 7; Algorithm 2). Records ``n_data`` and B for N (eq. 12 / section 4).
        ``n_samples`` and ``generator`` are unused (θ_t is a point estimate)."""
        self.n_data = float(n_data)
        self.batch_size = x.shape[-2]
        dense = [(w.unsqueeze(0), b.unsqueeze(0)) for w, b in zip(self.weights, self.biases)]
        return -log_likelihood(mlp_forward(dense, x, self.activation), y).mean()
