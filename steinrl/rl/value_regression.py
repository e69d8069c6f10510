"""The value networks' regression step written out: forward and backward of an
:class:`~steinrl.core.ensemble.EnsembleMLP` of dense layers into buffers reused across the steps
of a fit (what autograd computes, to float rounding; :class:`steinrl.rl.critics.ValueEnsemble`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from steinrl.core.ensemble import EnsembleMLP

__all__ = ["ValueRegression"]


class _Hidden(NamedTuple):
    """How :class:`ValueRegression` computes a hidden activation: it stores u = forward(z_scale · z)
    (in place), the layer's output is h = alpha u + beta, and dh/dz = scale · derivative(u)
    (in place on u)."""

    forward: Callable[[Tensor], Tensor]
    z_scale: float
    alpha: float
    beta: float
    derivative: Callable[[Tensor], Tensor] | None
    scale: float


#: tanh as u = sigmoid(2z), tanh z = 2u − 1 (torch's float32 tanh is several times slower on
#: CPU, see steinrl.core.ensemble), 1 − tanh² z = 4 u (1 − u); relu's derivative 0 at 0 and
#: elu's exp z = u + 1 below 0, as autograd's.
_HIDDEN = {
    "tanh": _Hidden(torch.sigmoid_, 2.0, 2.0, -1.0, lambda u: u.addcmul_(u, u, value=-1.0), 4.0),
    "relu": _Hidden(torch.relu_, 1.0, 1.0, 0.0, Tensor.sign_, 1.0),
    "elu": _Hidden(torch.nn.functional.elu_, 1.0, 1.0, 0.0, lambda u: u.clamp_(max=0.0).add_(1.0), 1.0),
    "identity": _Hidden(lambda z: z, 1.0, 1.0, 0.0, None, 1.0),
}


class ValueRegression:
    """The value regression's step on an :class:`EnsembleMLP` of dense layers, forward and
    backward written out (what autograd computes, to float rounding) into buffers allocated
    once for all the steps of a fit. Feature-major throughout: a layer's activations are
    ``(M, features, n)``.

    :param net: the value networks (``layer="gaussian"``: W ``(M, in, out)``, bias ``(M, out)``).
    :param n: samples per particle of each step.
    """

    def __init__(self, net: EnsembleMLP, n: int):
        self.layers = [(layer.W, layer.bias) for layer in net.layers]
        self.act = _HIDDEN[net.activation]
        M = net.num_particles
        self.hidden = [w.new_empty(M, w.shape[2], n) for w, _ in self.layers[:-1]]  # each hidden layer's u
        self.grad_in = [w.new_empty(M, w.shape[1], n) for w, _ in self.layers[1:]]  # dL/dz of a layer's input

    def loss_and_gradients(self, x: Tensor, z: Tensor, weight: Tensor, total: Tensor) -> None:
        """Adds each particle's weighted squared error of the net on inputs ``x`` ``(M, in, n)``
        against ``z`` ``(M, 1, n)`` (weights ``(M, 1, n)``) to ``total`` ``(M,)``; puts its
        gradients (of the sum over particles) in the parameters' ``grad``."""
        act = self.act
        with torch.no_grad():
            h, alpha, beta = x, 1.0, 0.0  # the layer's input is alpha h + beta
            for i, (W, b) in enumerate(self.layers):
                hidden = i < len(self.hidden)
                s = act.z_scale if hidden else 1.0
                # s (W^T (alpha h + beta) + b): the constants go into the (small) weights
                bias = (b + beta * W.sum(1) if beta else b) * s
                h = torch.baddbmm(bias.unsqueeze(2), W.mT * (alpha * s), h, out=self.hidden[i] if hidden else None)
                if hidden:
                    act.forward(h)
                    alpha, beta = act.alpha, act.beta
            resid = h.sub_(z)  # (M, 1, n): prediction − target
            half = resid * weight
            total.add_((half * resid).sum((1, 2)))
            self._backward(x, half.mul_(2.0))

    def _backward(self, x: Tensor, g: Tensor) -> None:
        """Gradients into ``p.grad`` from ``g`` ``(M, 1, n)``, dL/d(prediction)."""
        act = self.act
        for i in range(len(self.layers) - 1, -1, -1):
            W, b = self.layers[i]
            b.grad = g.sum(-1)
            if i == 0:
                W.grad = torch.bmm(x, g.mT)
                return
            u = self.hidden[i - 1]
            W.grad = torch.baddbmm(b.grad.unsqueeze(1), u, g.mT, beta=act.beta, alpha=act.alpha)  # (alpha u + beta) g^T
            g = torch.bmm(W * act.scale, g, out=self.grad_in[i - 1])
            if act.derivative is not None:
                g.mul_(act.derivative(u))
