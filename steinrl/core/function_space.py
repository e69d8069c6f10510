"""The Stein direction with the kernel in function space (:class:`~steinrl.core.kernels.FunctionSpaceKernel`),
pulled back to the weights; the kernel's distances, bandwidth and diagnostics are those of the
weight-space direction (:func:`steinrl.core.stein.kernel_terms`).

Over-parameterised networks make weight-space distances a poor measure of how particles
differ (Wang et al., ICLR 2019, "Function space particle optimization"; D'Angelo & Fortuin,
NeurIPS 2021, "Repulsive deep ensembles are Bayesian"). Here each particle i is represented by
its outputs on B inputs shared by every particle, f_i = f(θ_i; X) ∈ R^F (a policy's action
means, or log-probabilities, on B states; a regression net's predictions on B inputs), and the
kernel is computed on those:

    d_ij = ‖f_i − f_j‖²,  h from the kernel's rule on d,  K_ij = k(d_ij / h),  R_ij = −k'(d_ij / h)

The repulsive term is the kernel's gradient in function space, pulled back to each particle's
weights by its Jacobian J_i = ∂f_i/∂θ_i (one batched vector-Jacobian product):

    rep_i = J_iᵀ (2 / (M h)) Σ_j R_ij (f_i − f_j)

and the driving term (the kernel's ``driving``) either averages the weight-space gradients
g_j = ∇ log target(θ_j) (``driving="weights"``), or is written in function space too
(``driving="functions"``): each gradient pushed forward to the outputs (J_j g_j, a
Jacobian-vector product), averaged with the kernel there and pulled back:

    weights:    φ_i = (1/M) Σ_j K_ij g_j + rep_i
    functions:  φ_i = J_iᵀ (1/M) Σ_j K_ij J_j g_j + rep_i

Parameters the outputs do not depend on (a prior's own per-particle parameters) take the
weight-space driving term (1/M) Σ_j K_ij g_j in both forms. When the network is linear in its
weights and the shared inputs are the identity, f_i = θ_i, J = I, and both forms are the
weight-space SVGD direction.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from steinrl.core.kernels import FunctionSpaceKernel
from steinrl.core.stein import Forces, RepulsionWeight, flatten, kernel_terms

__all__ = ["function_space_direction"]


def _vjp(outputs: Tensor, params: Sequence[Tensor], v: Tensor) -> tuple[Tensor, list[bool]]:
    """J_iᵀ v_i for every particle, flattened ``(M, D)``, and which parameters the outputs reach."""
    grads = torch.autograd.grad(outputs, params, v, retain_graph=True, allow_unused=True)
    used = [g is not None for g in grads]
    return flatten([g if g is not None else torch.zeros_like(p) for g, p in zip(grads, params)]), used


def _jvp(outputs: Tensor, params: Sequence[Tensor], grad: Tensor) -> Tensor:
    """J_i g_i for every particle ``(M, F)``, by two reverse passes: u ↦ Jᵀu is linear in u,
    and the gradient of ⟨Jᵀu, g⟩ with respect to u is J g."""
    u = torch.zeros_like(outputs, requires_grad=True)
    pulled = torch.autograd.grad(outputs, params, u, create_graph=True, allow_unused=True)
    sizes = [p[0].numel() for p in params]
    pieces = torch.split(grad, sizes, dim=1)
    terms = [(pb * g.reshape(pb.shape)).sum() for pb, g in zip(pulled, pieces) if pb is not None]
    (jg,) = torch.autograd.grad(sum(terms), u)
    return jg


def function_space_direction(outputs: Tensor, params: Sequence[Tensor], grad: Tensor, *,
                             kernel: FunctionSpaceKernel, groups: int = 1,
                             repulsion: RepulsionWeight | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """φ ``(M, D)`` for particles represented by their outputs on shared inputs.

    :param outputs: ``(M, F)`` every particle's outputs on the kernel's B shared inputs
        (``kernel.states``), differentiable with respect to ``params`` (particle i's depend on its own
        parameters only).
    :param params: the particles' parameters, each ``(M, ...)``, in the order of ``grad``'s columns.
    :param grad: ``(M, D)`` g_j = ∇ log target at θ_j, flattened as :func:`~steinrl.core.stein.flatten`.
    :param kernel: the function-space kernel (its base kernel's bandwidth rule applies to
        function-space distances; its ``driving`` term).
    :param groups: G groups of M / G consecutive particles coupled only within themselves (seeds).
    :param repulsion: a controller's weight λ of the repulsive term (None: 1), from the two terms'
        norms in weight space, where the optimizer steps, and the outputs' spread per shared input.
    :return: ``(phi, info)`` with the info of :func:`~steinrl.core.stein.svgd_direction`: the
        bandwidth, mean distance and kernel mean in function space, the attractive and
        repulsive norms of φ's two terms in weight space (``(G,)`` with groups, else 0-dim).
    """
    M, G = outputs.shape[0], int(groups)
    m = M // G
    with torch.no_grad():
        terms = kernel_terms(outputs.detach().reshape(G, m, -1), kernel)  # in function space
        rep_f = (2.0 / (terms.h[:, None, None] * m)) * (terms.centred * terms.rowsum - terms.R @ terms.centred)
        g = grad.reshape(G, m, -1)
        weight_att = (terms.K / m) @ g  # G m D: the weight-space driving term
    rep, used = _vjp(outputs, params, rep_f.reshape(outputs.shape))
    if kernel.driving == "functions":
        jg = _jvp(outputs, params, grad).detach().reshape(G, m, -1)
        att, _ = _vjp(outputs, params, ((terms.K / m) @ jg).reshape(outputs.shape))
        # parameters the outputs do not reach keep the weight-space driving term
        sizes = [p[0].numel() for p in params]
        keep = torch.cat([torch.full((n,), u, dtype=torch.bool, device=grad.device) for n, u in zip(sizes, used)])
        att = torch.where(keep, att, weight_att.reshape(M, -1))
    else:
        att = weight_att.reshape(M, -1)
    att, rep = att.detach().reshape(G, m, -1), rep.detach().reshape(G, m, -1)
    info = terms.info()
    info["attractive_norm"] = att.square().sum((-2, -1)).sqrt()
    if repulsion is not None:
        spread = terms.spread() / kernel.states  # per shared input
        weight = repulsion(Forces(att.norm(dim=-1), rep.norm(dim=-1), spread))  # (G, m) or (G, 1)
        info["repulsion_weight"] = weight.expand(G, m).mean(-1)
        rep = rep * weight[..., None]
    info["repulsive_norm"] = rep.square().sum((-2, -1)).sqrt()
    if G == 1:
        info = {k: v.reshape(()) for k, v in info.items()}
    return (att + rep).reshape(M, -1), info
