"""Stein kernels, registered by name, and the bandwidth heuristics they share.

Every kernel is translation-invariant, k(x, y) = f(r) with r = ‖x − y‖²/h, so that

    ∇_x k(x, y) = −(2/h) f'(r) (x − y),

and SVGD's repulsive term for particle i, (1/M) Σ_j ∇_{θ_j} k(θ_j, θ_i), is
(1/M)(2/h) Σ_j R_ij (θ_i − θ_j) with R_ij = −f'(r_ij) ≥ 0. A kernel gives both matrices,
``K`` and ``R`` (:meth:`Kernel.matrices`); :func:`steinrl.core.svgd.svgd_direction` does the rest.

==========  ============================  ===========================  ===================
name        k(x, y)                       R = −f'(r)                   as in
==========  ============================  ===========================  ===================
``rbf``     exp(−r)                       exp(−r) = K                  SVGD, SVPG, S²VGD
``imq``     (1 + r)^β, β = −1/2           −β (1 + r)^(β−1) = −β K/(1+r)  Pyro's ``IMQSteinKernel``
==========  ============================  ===========================  ===================

IMQ (inverse multiquadric) decays polynomially instead of exponentially: far-apart particles
keep some attraction to each other's gradients and some repulsion (Gorham & Mackey 2017 use
it for Stein discrepancies that detect non-convergence). Pyro's version adds a constant α
(``(α + r)^β``, α = 0.5 by default); here α = 1, so k(x, x) = 1 as for the RBF kernel.

Bandwidth rules (``bandwidth=``), the same for every kernel:

- ``"svpg"`` (default; the SVPG code's rule): h = median of the full M×M squared-
  distance matrix, diagonal zeros included, / (2·log(M+1)).
- ``"s2vgd"`` (S²VGD paper): h = med²/log M, med = median pairwise distance over i < j.
- a positive number: fixed h.

Medians are numpy's (mean of the two middle values for an even count; for odd M the
SVPG code instead averages the entries at n/2 − 1 and n/2 of the M² sorted ones, which
differs slightly — it only ran with M = 16). Guard: with M = 1, or when the rule gives
h ≤ 0 or non-finite (e.g. all particles equal), h = 1.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from steinrl.registry import Registry

__all__ = ["Kernel", "RBFKernel", "IMQKernel", "KERNELS", "BANDWIDTH_RULES", "bandwidth", "check_bandwidth_rule",
           "pairwise_sq_dists", "sq_dists_from_gram", "kernel_matrix"]

BANDWIDTH_RULES = ("svpg", "s2vgd")


class Kernel:
    """A translation-invariant kernel k(x, y) = f(‖x − y‖²/h)."""

    #: one line for the docs
    doc = ""

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """``(K, R)`` from squared distances ``(..., M, M)`` and bandwidths broadcastable to them:
        K_ij = f(r_ij), R_ij = −f'(r_ij), r = d²/h. ``R is K`` when f' = −f (RBF)."""
        raise NotImplementedError


class RBFKernel(Kernel):
    """k = exp(−‖x − y‖²/h) (SVGD's and the papers' kernel); R = K."""

    doc = "RBF exp(-d²/h): the papers' kernel."

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        K = torch.exp(-sq_dists / h)
        return K, K


class IMQKernel(Kernel):
    """Inverse multiquadric k = (1 + ‖x − y‖²/h)^β.

    :param beta: the exponent β ∈ (−1, 0) (default −1/2).
    """

    def __init__(self, beta: float = -0.5) -> None:
        if not -1.0 < beta < 0.0:
            raise ValueError(f"beta must be in (-1, 0), got {beta}")
        self.beta = float(beta)
        self.doc = f"inverse multiquadric (1 + d²/h)^{beta:g}: heavier tails than rbf."

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        base = 1.0 + sq_dists / h
        K = base.pow(self.beta)
        return K, (-self.beta) * K / base


#: Stein kernels by name (the choices of the ``update.kernel`` option).
KERNELS: Registry[Kernel] = Registry("kernel")
KERNELS.register("rbf", RBFKernel())
KERNELS.register("imq", IMQKernel(-0.5))


def sq_dists_from_gram(gram: Tensor) -> Tensor:
    """‖c_i‖² + ‖c_j‖² − 2⟨c_i, c_j⟩ from the Gram matrix ``(..., M, M)`` of (centred) rows,
    clamped at 0, with a zero diagonal."""
    sq = gram.diagonal(dim1=-2, dim2=-1)
    d = (sq.unsqueeze(-1) + sq.unsqueeze(-2) - 2.0 * gram).clamp_min(0.0)
    return d.masked_fill(torch.eye(d.shape[-1], dtype=torch.bool, device=d.device), 0.0)


def pairwise_sq_dists(theta: Tensor) -> Tensor:
    """Squared Euclidean distances ``‖θ_i − θ_j‖²`` between particles.

    :param theta: ``(M, D)``.
    :return: ``(M, M)``, ≥ 0, zero diagonal. Computed with one matmul on rows centred
        at the particle mean (distances are translation-invariant; centring avoids
        cancellation when particles are far from the origin).
    """
    c = theta - theta.mean(dim=0, keepdim=True)  # M D
    return sq_dists_from_gram(c @ c.T)


def _median(x: Tensor) -> Tensor:
    # numpy's median along the last dim: mean of the two middle values for an even count
    s = torch.sort(x, dim=-1).values
    n = s.shape[-1]
    if n % 2 == 1:
        return s[..., n // 2]
    return 0.5 * (s[..., n // 2 - 1] + s[..., n // 2])


def check_bandwidth_rule(rule: str | float) -> None:
    """Raise ``ValueError`` unless ``rule`` is a name of :data:`BANDWIDTH_RULES` or a positive finite number."""
    if isinstance(rule, str):
        if rule not in BANDWIDTH_RULES:
            raise ValueError(f"unknown bandwidth rule {rule!r}; choices: {list(BANDWIDTH_RULES)} or a positive number")
    elif isinstance(rule, bool) or not isinstance(rule, (int, float)) or not (math.isfinite(rule) and rule > 0):
        raise ValueError(f"a fixed bandwidth must be a positive finite number, got {rule!r}")


def bandwidth(sq_dists: Tensor, rule: str | float = "svpg") -> Tensor:
    """Kernel bandwidth h (r = d²/h) from the squared-distance matrix.

    :param sq_dists: ``(M, M)`` from :func:`pairwise_sq_dists`, or ``(G, M, M)`` for G
        independent groups (one h each).
    :param rule: ``"svpg"`` (default): median of all M² entries (zeros on the diagonal
        included) / (2·log(M+1)); ``"s2vgd"``: med²/log M with med the median of the
        distances over i < j; or a positive number: fixed h.
    :return: h, a scalar tensor (``(G,)`` for groups). With M = 1, or if the rule gives
        h ≤ 0 or a non-finite value, h = 1 (for a median rule; a fixed h is used as given).
    """
    check_bandwidth_rule(rule)
    M = sq_dists.shape[-1]
    batch = sq_dists.shape[:-2]
    if not isinstance(rule, str):
        return torch.full(batch, float(rule), dtype=sq_dists.dtype, device=sq_dists.device)
    one = torch.ones(batch, dtype=sq_dists.dtype, device=sq_dists.device)
    if M == 1:
        return one
    if rule == "svpg":
        h = _median(sq_dists.reshape(*batch, M * M)) / (2.0 * math.log(M + 1))
    else:  # "s2vgd"
        rows, cols = torch.triu_indices(M, M, 1, device=sq_dists.device)
        med = _median(sq_dists[..., rows, cols].sqrt())
        h = med.square() / math.log(M)
    ok = torch.isfinite(h) & (h > 0)
    return torch.where(ok, h, one)  # no host sync


def kernel_matrix(theta: Tensor, kernel: str = "rbf", rule: str | float = "svpg") -> tuple[Tensor, Tensor]:
    """Kernel matrix K_ij = k(θ_i, θ_j) of a registered kernel.

    :param theta: ``(M, D)``.
    :param kernel: a name in :data:`KERNELS`.
    :param rule: bandwidth rule or fixed h, see :func:`bandwidth`.
    :return: ``(K (M, M), h scalar)``.
    """
    sq = pairwise_sq_dists(theta)
    h = bandwidth(sq, rule)
    return KERNELS.get(kernel).matrices(sq, h)[0], h
