"""Optimizers the particle update can hand −φ to, beyond torch's own.

:class:`TFRMSprop` is TensorFlow 1's ``RMSPropOptimizer`` (what the Deep Bayesian Bandits
Showdown code trains with), which differs from ``torch.optim.RMSprop`` in two ways that
matter for short trainings: the mean-square accumulator starts at 1 (torch: 0) and the
decay is 0.9 (torch: 0.99); ε is added inside the square root::

    ms ← ρ ms + (1 − ρ) g²,    θ ← θ − lr · g / sqrt(ms + ε)

:func:`inverse_time_lr` is ``tf.train.inverse_time_decay`` with ``decay_steps = 1``:
lr_t = lr_0 / (1 + decay · t), t the optimizer steps taken so far (one global schedule).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

__all__ = ["TFRMSprop", "inverse_time_lr"]


class TFRMSprop(torch.optim.Optimizer):
    """TensorFlow 1's RMSProp (no momentum, not centred).

    :param params: parameters to optimize.
    :param lr: learning rate.
    :param decay: ρ of the mean-square average (TF default 0.9).
    :param eps: added to the mean square inside the square root (TF default 1e-10).
    :param initial_accumulator: starting value of the mean square (TF: 1.0).
    """

    def __init__(self, params: Iterable[nn.Parameter], lr: float = 1e-3, decay: float = 0.9, eps: float = 1e-10,
                 initial_accumulator: float = 1.0) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        super().__init__(params, dict(lr=lr, decay=decay, eps=eps, initial_accumulator=initial_accumulator))

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 - torch's signature
        loss = None if closure is None else closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["mean_square"] = torch.full_like(p, group["initial_accumulator"])
                ms = state["mean_square"]
                ms.mul_(group["decay"]).addcmul_(p.grad, p.grad, value=1.0 - group["decay"])
                p.addcdiv_(p.grad, (ms + group["eps"]).sqrt_(), value=-group["lr"])
        return loss


def inverse_time_lr(lr: float, decay: float, step: int) -> float:
    """``lr / (1 + decay * step)`` (``tf.train.inverse_time_decay`` with ``decay_steps=1``)."""
    return lr / (1.0 + decay * step)
