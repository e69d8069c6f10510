"""Priors over groups of particle parameters (S²VGD paper, eq. 14).

Every prior scores a *group* of parameters per particle: ``log_prob(x)`` takes
``x`` of shape ``(M, n)`` (M particles, n entries in the group) and returns the
log density of each particle's group, shape ``(M,)``. A structured layer sums
these over its groups (see :meth:`steinrl.core.layers.StructuredLinear.log_prior`).

- :class:`GaussianPrior`: entries i.i.d. N(0, variance) with the variance fixed
  (the papers' RL setting uses 0.01).
- :class:`InvGammaPrior`: the hierarchical prior of eq. 14 — the group's variance
  s² ~ Inv-Gamma(a, b), entries | s² ~ N(0, s²) — with s² integrated out in
  closed form (a multivariate Student-t). There are no learned log-variances.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["GaussianPrior", "InvGammaPrior", "PRIORS", "make_prior"]

_LOG_2PI = math.log(2.0 * math.pi)


def _check_group(x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"a prior group must have shape (M, n), got {tuple(x.shape)}")


class GaussianPrior:
    """Isotropic Gaussian prior N(0, variance·I) on each group.

    :param variance: the fixed prior variance σ² (> 0); 0.01 in the papers' RL runs.
    """

    def __init__(self, variance: float = 0.01) -> None:
        if not variance > 0:
            raise ValueError(f"variance must be > 0, got {variance}")
        self.variance = float(variance)

    def log_prob(self, x: Tensor) -> Tensor:
        """Full log density (normalising constant included).

        :param x: ``(M, n)`` one group of n entries per particle.
        :return: ``(M,)`` log N(x; 0, σ²I) = −n/2·log(2πσ²) − ‖x‖²/(2σ²).
        """
        _check_group(x)
        n = x.shape[1]
        sq_norm = x.square().sum(dim=1)  # M
        return -0.5 * n * (_LOG_2PI + math.log(self.variance)) - 0.5 * sq_norm / self.variance

    def __repr__(self) -> str:
        return f"GaussianPrior(variance={self.variance})"


class InvGammaPrior:
    """Hierarchical Gaussian prior with an Inv-Gamma(a, b) group variance, marginalised.

    Model (S²VGD paper, eq. 14): s² ~ Inv-Gamma(a, b); x_k | s² ~ N(0, s²) for the n
    entries of the group. Integrating s² out gives the closed form (a multivariate
    Student-t with 2a degrees of freedom and scale² b/a)::

        log p(x) = lgamma(a + n/2) − lgamma(a) + a·log b − (n/2)·log(2π)
                   − (a + n/2)·log(b + ‖x‖²/2)

    This is the closed-form marginal: no per-group log-variances are learned or
    sampled, so the group's scale adapts to its own entries through ‖x‖.

    :param a: Inv-Gamma shape (> 0); 1.0 in the paper.
    :param b: Inv-Gamma scale (> 0); 0.1 in the paper.
    """

    def __init__(self, a: float = 1.0, b: float = 0.1) -> None:
        if not (a > 0 and b > 0):
            raise ValueError(f"a and b must be > 0, got a={a}, b={b}")
        self.a = float(a)
        self.b = float(b)

    def log_prob(self, x: Tensor) -> Tensor:
        """Marginal log density of each particle's group.

        :param x: ``(M, n)`` one group of n entries per particle.
        :return: ``(M,)`` the closed-form log p(x) above.
        """
        _check_group(x)
        n = x.shape[1]
        a, b = self.a, self.b
        const = math.lgamma(a + 0.5 * n) - math.lgamma(a) + a * math.log(b) - 0.5 * n * _LOG_2PI
        sq_norm = x.square().sum(dim=1)  # M
        return const - (a + 0.5 * n) * torch.log(b + 0.5 * sq_norm)

    def __repr__(self) -> str:
        return f"InvGammaPrior(a={self.a}, b={self.b})"


PRIORS = {"gaussian": GaussianPrior, "invgamma": InvGammaPrior}


def make_prior(name: str, **kwargs: float) -> GaussianPrior | InvGammaPrior:
    """Build a prior by name (``"gaussian"`` or ``"invgamma"``) with its keyword arguments."""
    try:
        cls = PRIORS[name]
    except KeyError:
        raise ValueError(f"unknown prior {name!r}; valid names: {sorted(PRIORS)}") from None
    return cls(**kwargs)
