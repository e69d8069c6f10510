"""Stein variational gradient descent over M particles, fused (no loop over particles).

Each particle is flattened to θ_i ∈ R^D (stacked: Θ, shape ``(M, D)``); g_j is the
gradient of the log target at θ_j. With a kernel k(x, y) = f(‖x − y‖²/h) from
:data:`steinrl.core.kernels.KERNELS` (K_ij = k(θ_i, θ_j), R_ij = −f'(‖θ_i − θ_j‖²/h)), the
SVGD direction is

    φ_i = (1/M) Σ_j [k(θ_j, θ_i) g_j + ∇_{θ_j} k(θ_j, θ_i)]
        = (1/M) [K G]_i  +  (1/M)(2/h) [Θ ⊙ rowsum(R) − R Θ]_i
          (attractive)        (repulsive)

for the whole ensemble at once. For the RBF kernel κ_ij = exp(−‖θ_i − θ_j‖²/h) (S²VGD
paper eq. 9) R = K, and :func:`svgd_direction` evaluates it as
(1/M)[K (G − (2/h)Θ) + (2/h) rowsum(K) ⊙ Θ] with Θ centred at the particle mean (the
repulsive term is translation-invariant): one (M×M)·(M×D) matmul, plus the Gram
matrix ΘΘᵀ for the distances; other kernels take a second matmul. The sum runs over all
j including j = i (as in the SVPG code). :class:`SVGD` hands −φ to a torch optimizer
(Adam / RMSprop), so θ ← θ + ε φ for plain SGD. With M = 1 (or ``kernel="independent"``)
φ = g: MAP / independent gradient ascent, the papers' baseline.

Bandwidth rules (``bandwidth=``: ``"svpg"``, the default, ``"s2vgd"`` or a fixed h) are
those of :func:`steinrl.core.kernels.bandwidth`, the same for every kernel.

At scale (M ≈ 10³, D ≈ 10⁶) the work is three M×M×D products: the particle Gram ΘΘᵀ, the
kernel product, and the Gram GGᵀ that only feeds the logged ``attractive_norm`` (computed by
default only up to D = :data:`ATTRACTIVE_NORM_MAX_DIM`). ``precision="bf16"`` runs the last two
with bfloat16 operands on any device; the particle Gram stays in full precision, since the
distances ‖c_i‖² + ‖c_j‖² − 2⟨c_i, c_j⟩ cancel and would hand the bandwidth bf16's (or TF32's)
relative error, amplified by ‖c‖²/d². (steinrl never turns on torch's TF32 flags: they are
process-wide and would reach that Gram too.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from steinrl.core.kernels import (
    BANDWIDTH_RULES,
    KERNELS,
    bandwidth,
    check_bandwidth_rule,
    kernel_matrix,
    pairwise_sq_dists,
    sq_dists_from_gram,
)
from steinrl.core.optim import TFRMSprop, adam

__all__ = [
    "flatten",
    "unflatten_into",
    "pairwise_sq_dists",
    "bandwidth",
    "rbf_kernel",
    "svgd_direction",
    "proximal_gradient",
    "SVGD",
    "KERNELS",
    "INDEPENDENT",
    "BANDWIDTH_RULES",
    "OPTIMIZERS",
    "PRECISIONS",
    "ATTRACTIVE_NORM_MAX_DIM",
]

#: The kernel name of independent particles (κ = I: no coupling), beside the registered kernels.
INDEPENDENT = "independent"
#: Precisions of the kernel product (``precision=`` of :func:`svgd_direction`).
PRECISIONS = ("full", "bf16")
#: By default :func:`svgd_direction` reports ``attractive_norm`` only up to this D (it costs a Gram matrix).
ATTRACTIVE_NORM_MAX_DIM = 100_000
_bandwidth = bandwidth  # the module function, for use where an argument shadows the name
OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "adam": adam,  # torch's Adam, fused where available
    "rmsprop": torch.optim.RMSprop,
    "rmsprop_tf": TFRMSprop,
    "sgd": torch.optim.SGD,
}


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


def check_kernel(kernel: str) -> None:
    """Raise ``ValueError`` unless ``kernel`` is registered in :data:`KERNELS` or is ``"independent"``."""
    if kernel != INDEPENDENT and kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choices: {[*KERNELS, INDEPENDENT]}")


def check_precision(precision: str) -> None:
    """Raise ``ValueError`` unless ``precision`` is one of :data:`PRECISIONS`."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choices: {list(PRECISIONS)}")


def rbf_kernel(theta: Tensor, bandwidth: str | float = "svpg") -> tuple[Tensor, Tensor]:
    """RBF kernel matrix κ_ij = exp(−‖θ_i − θ_j‖²/h): ``(K (M, M), h scalar)`` for ``theta (M, D)``
    (:func:`steinrl.core.kernels.kernel_matrix` of ``"rbf"``)."""
    return kernel_matrix(theta, "rbf", bandwidth)


@torch.no_grad()
def svgd_direction(
    theta: Tensor,
    grad: Tensor,
    *,
    kernel: str = "rbf",
    bandwidth: str | float = "svpg",
    attractive_norm: bool | None = None,
    precision: str = "full",
) -> tuple[Tensor, dict[str, Tensor]]:
    """The SVGD ascent direction φ for every particle, fused.

    :param theta: ``(M, D)`` particles, or ``(G, M, D)``: G independent groups (e.g. seeds
        trained in one batch) whose particles the kernel couples only within their group.
    :param grad: the same shape, g_j = ∇ log target at θ_j (an ascent direction).
    :param kernel: a registered kernel (``"rbf"``, the papers' SVGD, or ``"imq"``; see
        :mod:`steinrl.core.kernels`) or ``"independent"`` (κ = I, no repulsion: φ = g).
    :param bandwidth: rule or fixed h, see :func:`bandwidth` (one h per group).
    :param attractive_norm: report ``"attractive_norm"`` for a kernel: it costs the M×M Gram
        matrix of the gradients, M²D multiply-adds (a third of the direction's FLOPs at large M).
        None (default): only for D ≤ :data:`ATTRACTIVE_NORM_MAX_DIM`.
    :param precision: ``"full"`` (default: everything in theta's dtype) or ``"bf16"``: the kernel
        product(s) with G (and the Gram of the gradients) take bfloat16 operands (fp32
        accumulation; each element of φ off by at most ~3·2⁻⁸ of Σ_j |K_ij / M| |(G − (2/h)Θ)_jd|).
        The Gram matrix of the centred particles stays in full precision on every setting:
        distances come from it by a subtraction that cancels, and the bandwidth and K with them.
    :return: ``(phi, info)``, phi shaped like theta, info of detached tensors (0-dim, or
        ``(G,)`` per group):
        ``"bandwidth"`` h (for ``"independent"``: the h a kernel would use),
        ``"mean_pairwise_distance"`` mean ‖θ_i − θ_j‖ over i ≠ j,
        ``"kernel_mean"`` mean off-diagonal κ_ij (0 for ``"independent"``),
        ``"attractive_norm"`` (when computed) / ``"repulsive_norm"`` Frobenius norms of the
        two terms (``(M, D)`` each). With M = 1 there are no pairs: distance and kernel mean are 0.

    Runs under ``torch.no_grad`` (φ is an update direction, not differentiated);
    ``theta`` and ``grad`` are not modified.
    """
    check_kernel(kernel)
    check_precision(precision)
    if theta.dim() not in (2, 3) or grad.shape != theta.shape:
        raise ValueError(f"theta and grad must both be (M, D) or (G, M, D), got {tuple(theta.shape)} and "
                         f"{tuple(grad.shape)}")
    M = theta.shape[-2]
    n_pairs = max(M * (M - 1), 1)
    c = theta - theta.mean(dim=-2, keepdim=True)  # (G) M D, centred (everything below is translation-invariant)
    gram = c @ c.mT  # (G) M M, always full precision: the distances below cancel
    sq = sq_dists_from_gram(gram)  # (G) M M
    h = _bandwidth(sq, bandwidth)  # (G)
    mean_dist = sq.sqrt().sum((-2, -1)) / n_pairs
    zero = torch.zeros_like(h)
    if kernel == INDEPENDENT:
        info = {
            "bandwidth": h,
            "mean_pairwise_distance": mean_dist,
            "kernel_mean": zero,
            "attractive_norm": torch.linalg.vector_norm(grad, dim=(-2, -1)),
            "repulsive_norm": zero,
        }
        return grad, info
    hh = h[..., None, None]  # (G) 1 1
    K, R = KERNELS.get(kernel).matrices(sq, hh)  # (G) M M each; R is K for rbf
    rowsum = R.sum(dim=-1, keepdim=True)  # (G) M 1
    info = {"bandwidth": h, "mean_pairwise_distance": mean_dist,
            "kernel_mean": (K.sum((-2, -1)) - K.diagonal(dim1=-2, dim2=-1).sum(-1)) / n_pairs}
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
    h = _bandwidth(d, "svpg")
    w = ((1.0 - d / h) * torch.exp(-d / h)).sum(1, keepdim=True)  # M 1
    return w * (theta - prev) / theta.shape[0]


class SVGD:
    """SVGD over particle parameters, stepping a torch optimizer with −φ as the gradient.

    Usage: ``loss = (-log_target).sum(); loss.backward(); info = svgd.step()``, where
    ``log_target`` is ``(M,)``. Each ``p.grad`` then holds ∇(loss), i.e. −g; ``step``
    turns the stacked g into φ (:func:`svgd_direction`), writes ``p.grad = −φ`` and
    calls the optimizer, so plain SGD gives θ ← θ + lr·φ.

    :param params: parameters with a shared leading particle dim M.
    :param lr: step size (> 0).
    :param optimizer: ``"adam"`` (default, as the SVPG code), ``"rmsprop"`` (the
        S²VGD paper) or ``"sgd"``.
    :param kernel: a registered kernel (``"rbf"``, ``"imq"``) or ``"independent"``.
    :param bandwidth: ``"svpg"`` (default), ``"s2vgd"`` or a fixed positive h.
    :param optimizer_kwargs: extra arguments of the torch optimizer.
    :param compile: run :func:`svgd_direction` through ``torch.compile`` (off by default).
    :param proximal: weight of the S²VGD code's proximal term (:func:`proximal_gradient`;
        0.1 there, 0 = off), added to the gradient handed to the optimizer.
    :param max_norm: if set, each particle's direction φ_i is scaled down to at most this
        Euclidean norm before the optimizer sees it (gradient clipping, per particle).
    :param groups: G > 1 splits the leading dim into G consecutive groups of M / G
        particles (e.g. seeds trained in one batch); the kernel couples particles only within
        their group, and :meth:`step`'s info holds one value per group ``(G,)``.
    :param attractive_norm: report the attractive term's norm (a Gram matrix of the gradients);
        None (default): only for D ≤ :data:`ATTRACTIVE_NORM_MAX_DIM` (see :func:`svgd_direction`).
    :param precision: ``"full"`` (default) or ``"bf16"`` kernel products (see :func:`svgd_direction`).
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        *,
        lr: float,
        optimizer: str = "adam",
        kernel: str = "rbf",
        bandwidth: str | float = "svpg",
        optimizer_kwargs: dict | None = None,
        compile: bool = False,
        proximal: float = 0.0,
        max_norm: float | None = None,
        groups: int = 1,
        attractive_norm: bool | None = None,
        precision: str = "full",
    ) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("SVGD got an empty parameter list")
        if any(p.dim() == 0 for p in self.params):
            raise ValueError("every parameter needs a leading particle dim M")
        Ms = {p.shape[0] for p in self.params}
        if len(Ms) != 1:
            raise ValueError(f"parameters disagree on the particle dim M: {sorted(Ms)}")
        self.num_particles = Ms.pop()
        if groups < 1 or self.num_particles % groups:
            raise ValueError(f"groups must divide the {self.num_particles} particles, got {groups}")
        if groups > 1 and proximal:
            raise ValueError("the proximal term is not available with groups > 1")
        self.groups = int(groups)
        if not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r}; choices: {list(OPTIMIZERS)}")
        check_kernel(kernel)
        check_bandwidth_rule(bandwidth)
        check_precision(precision)
        self.scale_options = {"attractive_norm": attractive_norm, "precision": precision}
        if not (math.isfinite(proximal) and proximal >= 0):
            raise ValueError(f"proximal must be >= 0, got {proximal!r}")
        self.proximal = float(proximal)
        if max_norm is not None and not (math.isfinite(max_norm) and max_norm > 0):
            raise ValueError(f"max_norm must be > 0 or None, got {max_norm!r}")
        self.max_norm = max_norm
        self.prev_theta: Tensor | None = None  # (M, D) before the last update (proximal term)
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.optimizer: torch.optim.Optimizer = OPTIMIZERS[optimizer](
            self.params, lr=lr, **(optimizer_kwargs or {})
        )
        self._direction: Callable[..., tuple[Tensor, dict[str, Tensor]]] = (
            torch.compile(svgd_direction) if compile else svgd_direction
        )

    @torch.no_grad()
    def step(self) -> dict[str, Tensor]:
        """One SVGD update from the loss gradients in ``p.grad`` (None counts as 0).

        :return: the info dict of :func:`svgd_direction` (detached 0-dim tensors).
        """
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        g = flatten(grads).neg_()  # M D, ∇ log target
        theta = flatten([p.detach() for p in self.params])  # M D
        if self.groups > 1:  # (G, M/G, D): the kernel within each group
            G = self.groups
            phi, info = self._direction(theta.view(G, -1, theta.shape[1]), g.view(G, -1, g.shape[1]),
                                        kernel=self.kernel, bandwidth=self.bandwidth, **self.scale_options)
            phi = phi.reshape(theta.shape)
        else:
            phi, info = self._direction(theta, g, kernel=self.kernel, bandwidth=self.bandwidth,
                                        **self.scale_options)
        if self.proximal > 0:
            if self.prev_theta is not None:
                phi.sub_(proximal_gradient(theta, self.prev_theta), alpha=self.proximal)
            self.prev_theta = theta
        if self.max_norm is not None:
            norm = torch.linalg.vector_norm(phi, dim=1, keepdim=True)  # M 1
            phi.mul_((self.max_norm / norm.clamp_min(1e-30)).clamp_(max=1.0))
        for p, d in zip(self.params, unflatten_into(phi, self.params)):
            if p.grad is None:
                p.grad = torch.neg(d)
            else:
                torch.neg(d, out=p.grad)
        self.optimizer.step()
        return info

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The torch optimizer's parameter groups (set ``lr`` here, as on any optimizer)."""
        return self.optimizer.param_groups

    def state_dict(self) -> dict[str, Any]:
        """The torch optimizer's state dict, plus the previous particles if the proximal
        term is on (loadable with ``torch.load(weights_only=True)``)."""
        state = self.optimizer.state_dict()
        if self.prev_theta is not None:
            state = {**state, "prev_theta": self.prev_theta}
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        self.prev_theta = state.pop("prev_theta", None)
        self.optimizer.load_state_dict(state)

