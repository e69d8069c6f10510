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

:class:`steinrl.core.couplings.SteinCoupling` calls :func:`svgd_direction`;
:class:`steinrl.core.particle_optimizer.ParticleOptimizer` hands −φ to a torch optimizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from steinrl.core.kernels import Kernel, RBFKernel, bandwidth, sq_dists_from_gram

__all__ = ["flatten", "unflatten_into", "svgd_direction", "kernel_terms", "KernelTerms", "Forces", "proximal_gradient",
           "independent_stats", "PRECISIONS", "ATTRACTIVE_NORM_MAX_DIM"]

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


@dataclass
class Forces:
    """The two SVGD terms' sizes that a repulsion controller sees (:mod:`steinrl.core.repulsion`),
    in the space the optimizer steps in (the weights)."""

    attractive_norm: Tensor  # (G, M) ‖(1/M) Σ_j K_ij g_j‖ per particle
    repulsive_norm: Tensor  # (G, M) the repulsive term's norm per particle at weight 1
    spread: Tensor | None = None  # (G,) mean squared distance of the particles' outputs per shared input (or None)


def check_precision(precision: str) -> None:
    """Raise ``ValueError`` unless ``precision`` is one of :data:`PRECISIONS`."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choices: {list(PRECISIONS)}")


@dataclass
class KernelTerms:
    """What a kernel makes of particles (or their embeddings) ``x`` ``(G, M, F)``: the one
    distance and diagnostics code of both spaces (:func:`kernel_terms`)."""

    centred: Tensor  # (G, M, F) x − mean_j x_j (everything is translation-invariant)
    gram: Tensor  # (G, M, M) centred Gram matrix, full precision (the distances cancel)
    sq_dists: Tensor  # (G, M, M) ‖x_i − x_j‖², zero diagonal
    h: Tensor  # (G,) bandwidth
    K: Tensor  # (G, M, M) k(x_i, x_j)
    R: Tensor  # (G, M, M) −f'(r_ij) (K itself for an exponential kernel)

    @property
    def rowsum(self) -> Tensor:
        """Σ_j R_ij ``(G, M, 1)``."""
        return self.R.sum(dim=-1, keepdim=True)

    def info(self) -> dict[str, Tensor]:
        """The bandwidth, mean distance over i ≠ j and mean off-diagonal κ_ij ``(G,)`` (0 with M = 1)."""
        M = self.K.shape[-1]
        pairs = max(M * (M - 1), 1)
        return {"bandwidth": self.h, "mean_pairwise_distance": self.sq_dists.sqrt().sum((-2, -1)) / pairs,
                "kernel_mean": (self.K.sum((-2, -1)) - self.K.diagonal(dim1=-2, dim2=-1).sum(-1)) / pairs}

    def repulsive_sq_norms(self) -> Tensor:
        """‖rep_i‖² ``(G, M)`` of the repulsion (2/(Mh)) Σ_j R_ij (x_i − x_j) from M×M matrices alone:
        diag(L C Lᵀ) (2/(Mh))² with L = diag(rowsum R) − R and C the centred Gram (no pass over F)."""
        M = self.K.shape[-1]
        lap = torch.diag_embed(self.rowsum.squeeze(-1)) - self.R  # (G) M M
        return ((lap @ self.gram) * lap).sum(-1).clamp_min(0.0) * (2.0 / self.h[..., None] / M).square()

    def spread(self) -> Tensor:
        """The mean squared distance over pairs i ≠ j ``(G,)``."""
        M = self.K.shape[-1]
        return self.sq_dists.sum((-2, -1)) / max(M * (M - 1), 1)


@torch.no_grad()
def kernel_terms(x: Tensor, kernel: Kernel) -> KernelTerms:
    """The kernel's matrices and bandwidth for particles ``x`` ``(M, F)`` or ``(G, M, F)`` (G groups
    coupled only within themselves; the terms are ``(G, ...)`` either way). The centred Gram is
    always in full precision: distances come from it by a subtraction that cancels."""
    x = x if x.dim() == 3 else x.unsqueeze(0)
    c = x - x.mean(dim=-2, keepdim=True)  # G M F
    gram = c @ c.mT  # G M M
    sq = sq_dists_from_gram(gram)
    h = kernel.bandwidth(sq)  # G
    K, R = kernel.matrices(sq, h[..., None, None])
    return KernelTerms(c, gram, sq, h, K, R)


def _check_shapes(theta: Tensor, grad: Tensor) -> None:
    if theta.dim() not in (2, 3) or grad.shape != theta.shape:
        raise ValueError(f"theta and grad must both be (M, D) or (G, M, D), got {tuple(theta.shape)} and "
                         f"{tuple(grad.shape)}")


def _squeeze(info: dict[str, Tensor], grouped: bool) -> dict[str, Tensor]:
    return info if grouped else {k: v.reshape(()) for k, v in info.items()}


@torch.no_grad()
def independent_stats(theta: Tensor, grad: Tensor) -> dict[str, Tensor]:
    """What particles that follow their own gradients (φ = g, no kernel) report: the mean
    distance and the norm of the gradients ``(G)`` (no bandwidth or kernel: there is none)."""
    _check_shapes(theta, grad)
    c = theta - theta.mean(dim=-2, keepdim=True)
    M = theta.shape[-2]
    sq = sq_dists_from_gram(c @ c.mT)
    return {"mean_pairwise_distance": sq.sqrt().sum((-2, -1)) / max(M * (M - 1), 1),
            "attractive_norm": torch.linalg.vector_norm(grad, dim=(-2, -1))}


#: ``forces -> weight``: a repulsion controller's weight ``(G, M)`` or ``(G, 1)`` of the repulsive
#: term, from the forces (:class:`steinrl.core.repulsion.Forces`)
RepulsionWeight = Callable[["Forces"], Tensor]


@torch.no_grad()
def svgd_direction(
    theta: Tensor,
    grad: Tensor,
    *,
    kernel: Kernel | None = None,
    attractive_norm: bool | None = None,
    precision: str = "full",
    repulsion: RepulsionWeight | None = None,
    spread: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The SVGD ascent direction φ for every particle, fused.

    :param theta: ``(M, D)`` particles, or ``(G, M, D)``: G independent groups (e.g. seeds
        trained in one batch) whose particles the kernel couples only within their group.
    :param grad: the same shape, g_j = ∇ log target at θ_j (an ascent direction).
    :param kernel: a weight-space :class:`~steinrl.core.kernels.Kernel` with its bandwidth rule
        (one h per group); None: ``RBFKernel()``, the papers' (bandwidth rule ``svpg``).
    :param attractive_norm: report ``"attractive_norm"``: it costs the M×M Gram matrix of the
        gradients, M²D multiply-adds (a third of the direction's FLOPs at large M).
        None (default): only for D ≤ :data:`ATTRACTIVE_NORM_MAX_DIM` (always with ``repulsion``).
    :param precision: ``"full"`` (default: everything in theta's dtype) or ``"bf16"``: the kernel
        product(s) with G (and the Gram of the gradients) take bfloat16 operands (fp32
        accumulation; each element of φ off by at most ~3·2⁻⁸ of Σ_j |K_ij / M| |(G − (2/h)Θ)_jd|).
        The Gram matrix of the centred particles stays in full precision on every setting:
        distances come from it by a subtraction that cancels, and the bandwidth and K with them.
    :param repulsion: a controller's weight λ of the repulsive term (None: 1, SVGD's), from the
        two terms' norms per particle: φ_i = attractive_i + λ_i repulsive_i.
    :param spread: the particles' spread on shared inputs ``(G,)``, for the controller (optional).
    :return: ``(phi, info)``, phi shaped like theta, info of detached tensors (0-dim, or
        ``(G,)`` per group):
        ``"bandwidth"`` h, ``"mean_pairwise_distance"`` mean ‖θ_i − θ_j‖ over i ≠ j,
        ``"kernel_mean"`` mean off-diagonal κ_ij,
        ``"attractive_norm"`` (when computed) / ``"repulsive_norm"`` Frobenius norms of the
        two terms (``(M, D)`` each; the repulsive one as weighted), and with a controller
        ``"repulsion_weight"`` (the mean λ). With M = 1 there are no pairs: distance and kernel mean are 0.

    Runs under ``torch.no_grad`` (φ is an update direction, not differentiated);
    ``theta`` and ``grad`` are not modified.
    """
    kernel = RBFKernel() if kernel is None else kernel
    check_precision(precision)
    _check_shapes(theta, grad)
    grouped, M = theta.dim() == 3, theta.shape[-2]
    g = grad if grouped else grad.unsqueeze(0)  # G M D
    terms = kernel_terms(theta, kernel)
    info = terms.info()
    rep_sq = terms.repulsive_sq_norms()  # (G, M): M³, no pass over D
    att_sq = None
    small = theta.shape[-1] <= ATTRACTIVE_NORM_MAX_DIM
    if repulsion is not None or attractive_norm or (attractive_norm is None and small):
        # ‖K G‖_i² = (K (G Gᵀ) K)_ii: from an M×M Gram matrix, without forming the (M, D) term
        gg = _operand(g, precision)
        att_sq = ((terms.K @ (gg @ gg.mT).to(terms.K.dtype)) * terms.K).sum(-1).clamp_min(0.0) / M**2  # (G, M)
        info["attractive_norm"] = att_sq.sum(-1).sqrt()
    weight = None
    if repulsion is not None:
        weight = repulsion(Forces(att_sq.sqrt(), rep_sq.sqrt(), spread))  # (G, M) or (G, 1)
        info["repulsion_weight"] = weight.expand(rep_sq.shape).mean(-1)
        rep_sq = rep_sq * weight.square()
    info["repulsive_norm"] = rep_sq.sum(-1).sqrt()
    scale = 2.0 / terms.h[..., None, None]  # G 1 1
    if weight is not None:
        scale = scale * weight[..., None]  # G M 1 or G 1 1
    if not grouped:  # the (M, D) products of one group: addmm where it fuses
        terms = KernelTerms(*(t[0] for t in (terms.centred, terms.gram, terms.sq_dists)), terms.h[0],
                            terms.K[0], terms.R[0])
        g, scale = grad, scale[0]
    phi = _kernel_product(terms, g, scale, kernel.exponential, precision)  # consumes the centred particles
    return phi, _squeeze(info, grouped)


def _operand(x: Tensor, precision: str) -> Tensor:
    """``x`` as an operand of a reduced-precision product (``precision`` of :func:`svgd_direction`)."""
    return x.to(torch.bfloat16) if precision == "bf16" else x


def _kernel_product(terms: KernelTerms, grad: Tensor, scale: Tensor, exponential: bool, precision: str) -> Tensor:
    """φ = (1/M)[K G − s ⊙ (R Θ − rowsum(R) ⊙ Θ)] ``(G, M, D)`` (or ``(M, D)``, one group) from the
    kernel terms (their centred particles overwritten with φ), ``grad`` shaped like them and
    ``scale`` s = λ 2/h, ``(G, 1, 1)`` (one weight per group) or ``(G, M, 1)`` (per particle: the
    rows of R scaled), without G for one group."""
    c, K, R, rowsum = terms.centred, terms.K, terms.R, terms.rowsum
    M = c.shape[-2]
    if exponential and scale.shape[-2] == 1:
        # R = K and one scale per group: φ = (1/M)[K (G − sΘ) + s rowsum(K) ⊙ Θ] (Θ centred), one
        # matmul and two elementwise passes over (M, D), written into the buffer of Θ (each fresh
        # (M, D) buffer costs page faults on CPU for large D).
        if precision == "bf16":  # G − sΘ computed in full precision, stored as bf16 in the same pass
            shifted = torch.empty(grad.shape, dtype=torch.bfloat16, device=grad.device)
            torch.addcmul(grad, c, scale, value=-1.0, out=shifted)
            return c.mul_(rowsum * (scale / M)).add_(_operand(K / M, precision) @ shifted)
        shifted = torch.addcmul(grad, c, scale, value=-1.0)  # (G) M D: G − sΘ
        if c.dim() == 2:
            return c.mul_(rowsum * (scale / M)).addmm_(K / M, shifted)  # M D
        return torch.baddbmm(c.mul_(rowsum * (scale / M)), K / M, shifted)  # G M D
    Rs = R * (scale / M)  # the rows of R, each with its particle's scale
    rowsum = Rs.sum(-1, keepdim=True)
    if precision == "bf16":  # two matmuls
        rep = _operand(Rs, precision) @ _operand(c, precision)
        att = _operand(K / M, precision) @ _operand(grad, precision)
        return c.mul_(rowsum).add_(att).sub_(rep)
    return torch.matmul(K / M, grad).sub_(torch.matmul(Rs, c)).addcmul_(c, rowsum)


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
