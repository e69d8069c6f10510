"""PPO-clip surrogate (Schulman et al., 2017) on A2C's GAE advantages.

Each batch is reused for ``epochs`` particle updates; J(θ_i) is the clipped surrogate
mean_t min(r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t) with r_t = π_θ(a_t|s_t) / π_old(a_t|s_t).
Its gradient at θ = θ_old equals the A2C surrogate's, so with ``epochs: 1`` PPO is A2C.
"""

from __future__ import annotations

import torch
from torch import Tensor

from steinrl.registry import Option, at_least_one, positive
from steinrl.rl.estimators.a2c import A2C
from steinrl.rl.estimators.base import ESTIMATORS

__all__ = ["PPO"]


@ESTIMATORS.register("ppo")
class PPO(A2C):
    """A2C's advantages with the clipped probability-ratio surrogate, several updates per batch."""

    options = A2C.options + (
        Option("clip_range", float, 0.2, "PPO's ε: the probability ratio is clipped to [1 - ε, 1 + ε].",
               check=positive),
        Option("epochs", int, 4, "Particle updates per batch (each on the whole batch).", check=at_least_one),
    )
    needs_old_log_prob = True

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.epochs = self.config["epochs"]

    def surrogate(self, log_prob: Tensor, old_log_prob: Tensor | None, advantages: Tensor, mask: Tensor) -> Tensor:
        eps = self.config["clip_range"]
        ratio = torch.exp(log_prob - old_log_prob)
        clipped = torch.minimum(ratio * advantages, ratio.clamp(1.0 - eps, 1.0 + eps) * advantages)
        return (clipped * mask).sum(1) / mask.sum(1).clamp_min(1.0)
