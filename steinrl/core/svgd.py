"""The SVGD direction over M particles, fused (no loop over particles).

Each particle is flattened to θ_i ∈ R^D (stacked: Θ, shape ``(M, D)``); g_j is the
gradient of the log target at θ_j. With a kernel k(x, y) = f(‖x − y‖²/h)
(:mod:`steinrl.core.kernels`; K_ij = k(θ_i, θ_j), R_ij = −f'(‖θ_i − θ_j‖²/h)), the
SVGD direction is

    φ_i = (1/M) Σ_j [k(θ_j, θ_i) g_j + ∇_{θ_j} k(θ_j, θ_i)]
        = (1/M) [K G]_i  +  (1/M)(2/h) [Θ ⊙ rowsum(R) − R Θ]_i
          (attractive)        (repulsive)

for the whole ensemble at once. For the RBF kernel κ_ij = exp(−‖θ_i − θ_j‖²/h) (S²VGD
paper eq. 9) R = K, and :func:`svgd_direction` evaluates it as
(1/M)[K (G − (2/h)Θ) + (2/h) rowsum(K) ⊙ Θ] with Θ centred at the particle mean (the
repulsive term is translation-invariant): one (M×M)·(M×D) matmul, plus the Gram
matrix ΘΘᵀ for the distances; other kernels take a second matmul. The sum runs over all
j including j = i (as in the SVPG code). With M = 1, φ = g.

At scale (M ≈ 10³, D ≈ 10⁶) the work is three M×M×D products: the particle Gram ΘΘᵀ, the
kernel product, and the Gram GGᵀ that only feeds the logged ``attractive_norm`` (computed by
default only up to D = :data:`ATTRACTIVE_NORM_MAX_DIM`). ``precision="bf16"`` runs the last two
with bfloat16 operands on any device; the particle Gram stays in full precision, since the
distances ‖c_i‖² + ‖c_j‖² − 2⟨c_i, c_j⟩ cancel and would hand the bandwidth bf16's (or TF32's)
relative error, amplified by ‖c‖²/d². (steinrl never turns on torch's TF32 flags: they are
process-wide and would reach that Gram too.)

:class:`steinrl.core.updates.SteinUpdate` calls :func:`svgd_direction`;
:class:`steinrl.core.particle_optimizer.ParticleOptimizer` hands −φ to a torch optimizer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from steinrl.core.kernels import Kernel, RBFKernel, bandwidth, sq_dists_from_gram

__all__ = ["flatten", "unflatten_into", "svgd_direction", "proximal_gradient", "direction_stats", "PRECISIONS",
           "ATTRACTIVE_NORM_MAX_DIM"]

#: Precisions of the kernel product (``precision=`` of :func:`svgd_direction`).
PRECISIONS = ("full", "bf16")
#: By default :func:`svgd_direction` reports ``attractive_norm`` only up to this D (it costs a Gram matrix).
ATTRACTIVE_NORM_MAX_DIM = 100_000


def flatten(tensors: Sequence[Tensor]) -> Tensor:
    """Stack particle tensors (each with leading dim M) into ``(M, D)``."""
    return torch.cat([t.reshape(t.shape[0], -1) for t in tensors], dim=1)


def unflatten_into(flat: Tensor, like: Sequence[Tensor]) -> list[Tensor]:
    """Split ``flat (M, D)`` into views shaped like each tensor of ``like`` (inverse of :func:`flatten`)."""
    sizes = [math.prod(t.shape[1:]) for t in like]
    if sum(sizes) != flat.shape[1]:
        raise ValueError(f"flat has D={flat.shape[1]} columns, tensors need {sum(sizes)}")
    chunks = torch.split(flat, sizes, dim=1)
    return [c.reshape(t.shape) for c, t in zip(chunks, like)]


def check_precision(precision: str) -> None:
    """Raise ``ValueError`` unless ``precision`` is one of :data:`PRECISIONS`."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choices: {list(PRECISIONS)}")


def _distances(theta: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Particles centred at their mean ``c``, their Gram matrix, squared distances ``(G) M M``
    (from the Gram, in full precision: they cancel) and the mean distance over i ≠ j ``(G)``."""
    M = theta.shape[-2]
    c = theta - theta.mean(dim=-2, keepdim=True)  # (G) M D, centred (everything below is translation-invariant)
    gram = c @ c.mT  # (G) M M
    sq = sq_dists_from_gram(gram)
    return c, gram, sq, sq.sqrt().sum((-2, -1)) / max(M * (M - 1), 1)


def _check_shapes(theta: Tensor, grad: Tensor) -> None:
    if theta.dim() not in (2, 3) or grad.shape != theta.shape:
        raise ValueError(f"theta and grad must both be (M, D) or (G, M, D), got {tuple(theta.shape)} and "
                         f"{tuple(grad.shape)}")


@torch.no_grad()
def direction_stats(theta: Tensor, grad: Tensor) -> dict[str, Tensor]:
    """What :func:`svgd_direction` reports, for particles that follow their own gradients
    (φ = g, no kernel): the bandwidth the default rule would give, the mean distance, kernel
    mean and repulsive norm 0, and the norm of the gradients ``(G)``."""
    _check_shapes(theta, grad)
    _, _, sq, mean_dist = _distances(theta)
    zero = torch.zeros_like(mean_dist)
    return {"bandwidth": bandwidth(sq, "svpg"), "mean_pairwise_distance": mean_dist, "kernel_mean": zero,
            "attractive_norm": torch.linalg.vector_norm(grad, dim=(-2, -1)), "repulsive_norm": zero}


@torch.no_grad()
def svgd_direction(
    theta: Tensor,
    grad: Tensor,
    *,
    kernel: Kernel | None = None,
    attractive_norm: bool | None = None,
    precision: str = "full",
) -> tuple[Tensor, dict[str, Tensor]]:
    """The SVGD ascent direction φ for every particle, fused.

    :param theta: ``(M, D)`` particles, or ``(G, M, D)``: G independent groups (e.g. seeds
        trained in one batch) whose particles the kernel couples only within their group.
    :param grad: the same shape, g_j = ∇ log target at θ_j (an ascent direction).
    :param kernel: a :class:`~steinrl.core.kernels.Kernel` with its bandwidth rule (one h per
        group); None: ``RBFKernel()``, the papers' (bandwidth rule ``svpg``).
    :param attractive_norm: report ``"attractive_norm"``: it costs the M×M Gram matrix of the
        gradients, M²D multiply-adds (a third of the direction's FLOPs at large M).
        None (default): only for D ≤ :data:`ATTRACTIVE_NORM_MAX_DIM`.
    :param precision: ``"full"`` (default: everything in theta's dtype) or ``"bf16"``: the kernel
        product(s) with G (and the Gram of the gradients) take bfloat16 operands (fp32
        accumulation; each element of φ off by at most ~3·2⁻⁸ of Σ_j |K_ij / M| |(G − (2/h)Θ)_jd|).
        The Gram matrix of the centred particles stays in full precision on every setting:
        distances come from it by a subtraction that cancels, and the bandwidth and K with them.
    :return: ``(phi, info)``, phi shaped like theta, info of detached tensors (0-dim, or
        ``(G,)`` per group):
        ``"bandwidth"`` h, ``"mean_pairwise_distance"`` mean ‖θ_i − θ_j‖ over i ≠ j,
        ``"kernel_mean"`` mean off-diagonal κ_ij,
        ``"attractive_norm"`` (when computed) / ``"repulsive_norm"`` Frobenius norms of the
        two terms (``(M, D)`` each). With M = 1 there are no pairs: distance and kernel mean are 0.

    Runs under ``torch.no_grad`` (φ is an update direction, not differentiated);
    ``theta`` and ``grad`` are not modified.
    """
    kernel = RBFKernel() if kernel is None else kernel
    check_precision(precision)
    _check_shapes(theta, grad)
    M = theta.shape[-2]
    c, gram, sq, mean_dist = _distances(theta)  # gram always in full precision: the distances cancel
    h = kernel.bandwidth(sq)  # (G)
    hh = h[..., None, None]  # (G) 1 1
    K, R = kernel.matrices(sq, hh)  # (G) M M each; R is K for rbf
    rowsum = R.sum(dim=-1, keepdim=True)  # (G) M 1
    info = {"bandwidth": h, "mean_pairwise_distance": mean_dist,
            "kernel_mean": (K.sum((-2, -1)) - K.diagonal(dim1=-2, dim2=-1).sum(-1)) / max(M * (M - 1), 1)}
    if attractive_norm or (attractive_norm is None and theta.shape[-1] <= ATTRACTIVE_NORM_MAX_DIM):
        # ‖K G‖² = ⟨K (G Gᵀ) K⟩, from an M×M Gram matrix, without forming the (M, D) term
        g = _operand(grad, precision)
        att_sq = ((K @ (g @ g.mT).to(K.dtype)) * K).sum((-2, -1)).clamp_min(0.0)
        info["attractive_norm"] = att_sq.sqrt() / M
    # ‖(diag(rowsum R) − R) Θ‖² = ⟨L (Θ Θᵀ) L⟩: M³, no pass over D
    lap = torch.diag_embed(rowsum.squeeze(-1)) - R  # (G) M M
    info["repulsive_norm"] = ((lap @ gram) * lap).sum((-2, -1)).clamp_min(0.0).sqrt() * (2.0 / h / M)
    phi = _kernel_product(c, grad, K, R, rowsum, 2.0 / hh, precision)  # consumes c
    return phi, info


def _operand(x: Tensor, precision: str) -> Tensor:
    """``x`` as an operand of a reduced-precision product (``precision`` of :func:`svgd_direction`)."""
    return x.to(torch.bfloat16) if precision == "bf16" else x


def _kernel_product(c: Tensor, grad: Tensor, K: Tensor, R: Tensor, rowsum: Tensor, scale: Tensor,
                    precision: str) -> Tensor:
    """φ = (1/M)[K G − (2/h) R Θ + (2/h) rowsum(R) ⊙ Θ] ``(G) M D`` from centred ``c`` (overwritten
    with φ), ``grad`` ``(G) M D``, ``K``, ``R`` ``(G) M M``, ``rowsum`` ``(G) M 1`` and ``scale`` = 2/h."""
    M = c.shape[-2]
    if R is K:
        # φ = (1/M)[K (G − (2/h)Θ) + (2/h) rowsum(K) ⊙ Θ] (Θ centred): one matmul and two
        # elementwise passes over (M, D), written into the buffer of Θ (each fresh (M, D)
        # buffer costs page faults on CPU for large D).
        if precision == "bf16":  # G − (2/h)Θ computed in full precision, stored as bf16 in the same pass
            shifted = torch.empty(grad.shape, dtype=torch.bfloat16, device=grad.device)
            torch.addcmul(grad, c, scale, value=-1.0, out=shifted)
            return c.mul_(rowsum * (scale / M)).add_(_operand(K / M, precision) @ shifted)
        shifted = torch.addcmul(grad, c, scale, value=-1.0)  # (G) M D: G − (2/h)Θ
        if c.dim() == 2:
            return c.mul_(rowsum * (scale / M)).addmm_(K / M, shifted)  # M D
        return torch.baddbmm(c.mul_(rowsum * (scale / M)), K / M, shifted)  # G M D
    if precision == "bf16":  # two matmuls
        rep = _operand(R * (scale / M), precision) @ _operand(c, precision)
        att = _operand(K / M, precision) @ _operand(grad, precision)
        return c.mul_(rowsum * (scale / M)).add_(att).sub_(rep)
    return torch.matmul(K / M, grad).sub_(torch.matmul(R * (scale / M), c)).addcmul_(c, rowsum * (scale / M))


def proximal_gradient(theta: Tensor, prev: Tensor) -> Tensor:
    """The S²VGD code's proximal term ``(M, D)``: w_i (θ_i − θ'_i) / M.

    θ' are the particles before the previous update, d_ij = ‖θ_i − θ'_j‖²,
    h = median of all M² entries of d / (2·log(M+1)) (the ``svpg`` rule) and
    w_i = Σ_j (1 − d_ij/h) exp(−d_ij/h). Added, times a weight, to the descent direction
    it pulls each particle back towards where it was (a soft trust region).

    :param theta: ``(M, D)`` current particles.
    :param prev: ``(M, D)`` the particles one update earlier.
    """
    mean = prev.mean(dim=0, keepdim=True)  # a common centre for both sets (less cancellation)
    a, b = theta - mean, prev - mean
    d = (a.square().sum(1, keepdim=True) + b.square().sum(1) - 2.0 * a @ b.T).clamp_min_(0.0)  # M M
    h = bandwidth(d, "svpg")
    w = ((1.0 - d / h) * torch.exp(-d / h)).sum(1, keepdim=True)  # M 1
    return w * (theta - prev) / theta.shape[0]
