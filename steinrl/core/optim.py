"""The gradient step of the models that are not particles, and optimizers beyond torch's own.

:func:`gradient_step` is how critics, variational posteriors and BNN regression's noise descend
their losses: set the learning rate, zero the gradients, backward, an optional hook on the
fresh gradients (e.g. a finiteness check), optional gradient-norm clipping, then step each
optimizer. Particles move by their own step,
:meth:`steinrl.core.particle_optimizer.ParticleOptimizer.step` (the temperature α, the prior, the coupling).

:class:`TFRMSprop` is TensorFlow 1's ``RMSPropOptimizer`` (what the Deep Bayesian Bandits
Showdown code trains with), which differs from ``torch.optim.RMSprop`` in two ways that
matter for short trainings: the mean-square accumulator starts at 1 (torch: 0) and the
decay is 0.9 (torch: 0.99); ε is added inside the square root::

    ms ← ρ ms + (1 − ρ) g²,    θ ← θ − lr · g / sqrt(ms + ε)

:func:`inverse_time_lr` is ``tf.train.inverse_time_decay`` with ``decay_steps = 1``:
lr_t = lr_0 / (1 + decay · t), t the optimizer steps taken so far (one global schedule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor, nn

__all__ = ["Steppable", "gradient_step", "TFRMSprop", "inverse_time_lr", "adam"]


class Steppable(Protocol):
    """What :func:`gradient_step` needs of an optimizer (a torch ``Optimizer``)."""

    param_groups: list[dict[str, Any]]

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def step(self) -> Any: ...


def gradient_step(loss: Tensor | Callable[[], Any], optimizers: Sequence[Steppable | None], *,
                  lr: float | None = None, max_grad_norm: float | None = None,
                  on_gradients: Callable[[], None] | None = None) -> Any:
    """One descent step of every optimizer on the scalar ``loss``.

    In order: every param group's ``lr`` set (if ``lr`` is given); every optimizer's gradients
    zeroed; ``loss.backward()``; ``on_gradients()`` (e.g. a check that the gradients are
    finite); the gradients of all the optimizers' parameters clipped to total norm
    ``max_grad_norm`` (``torch.nn.utils.clip_grad_norm_``, if given); every optimizer stepped.

    :param loss: a scalar tensor, or a zero-argument callable that fills the gradients
        itself (several backward passes, per-particle clipping, ...), called where
        ``loss.backward()`` would be.
    :param optimizers: in stepping order; None entries are skipped (an optional optimizer).
    :return: what the first optimizer's ``step()`` returned.
    """
    active = [opt for opt in optimizers if opt is not None]
    if lr is not None:
        for opt in active:
            for group in opt.param_groups:
                group["lr"] = lr
    for opt in active:
        opt.zero_grad()
    if callable(loss):
        loss()
    else:
        loss.backward()
    if on_gradients is not None:
        on_gradients()
    if max_grad_norm is not None:
        params = [p for opt in active for group in opt.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    results = [opt.step() for opt in active]
    return results[0] if results else None


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
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
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


def adam(params: Iterable[Tensor] | Iterable[dict[str, Any]], eps: float | None = None,
         **kwargs: Any) -> torch.optim.Adam:
    """``torch.optim.Adam`` with its fused implementation where this torch has one for the
    parameters' device (CPU: torch >= 2.4): one kernel for every parameter instead of a dozen
    ops each, the same update to float rounding (several times faster on small networks).
    ``eps`` None: torch's default (1e-8)."""
    params = list(params)
    if eps is not None:
        kwargs["eps"] = eps
    try:
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError, ValueError):  # no fused kernel for this device or dtype
        return torch.optim.Adam(params, **kwargs)
