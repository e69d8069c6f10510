"""The samples an update trains on: a batch's valid steps, compacted per particle to ``(M, n, ...)``.

A rollout's tensors are time-major ``(T, M, E, ...)`` with invalid steps (autoresets, steps past a
particle's budget) among them; an update trains on each particle's valid steps only, gathered
into the first columns of ``(M, n, ...)`` tensors (padding masked), so its forwards skip the
padding and every particle steps on its own samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from steinrl.rl.rollout import Batch

__all__ = ["Samples", "compact"]


@dataclass
class Samples:
    """A batch's valid steps, compacted per particle to ``(M, n, ...)`` (n = the most valid
    steps of any particle; shorter particles are padded and masked out)."""

    obs: Tensor  # (M, n, obs_dim) float32
    actions: Tensor  # (M, n, *action_shape)
    timestep: Tensor  # (M, n) int32: step index within the episode
    mask: Tensor  # (M, n) float32: 1 for real samples, 0 for padding
    advantages: Tensor  # (M, n) float32
    targets: Tensor | None  # (M, n) float64 value targets (None without a critic)


def compact(batch: Batch, advantages: Tensor, targets: Tensor | None, device: torch.device,
            trim: bool = True) -> Samples:
    """Gather every particle's valid steps of ``batch`` into :class:`Samples` on ``device``.

    :param advantages: ``(T, M, E)`` per-step advantages.
    :param targets: ``(T, M, E)`` value targets, or None.
    :param trim: cut the columns to the most valid steps of any particle (one host sync);
        without, all ``T * E`` columns are kept (padding masked).
    """
    T, M = batch.actions.shape[:2]
    valid = batch.valid.permute(1, 0, 2).reshape(M, -1)  # (M, T*E)
    n_max = int(valid.sum(1).max()) if trim else valid.shape[1]
    order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)[:, :n_max]  # (M, n_max), valid first
    mask = torch.gather(valid, 1, order).to(device, torch.float32)
    order = order.to(device)

    def take(x: Tensor) -> Tensor:  # (T, M, E, ...) -> (M, n_max, ...)
        x = x.to(device).transpose(0, 1).reshape(M, -1, *x.shape[3:])
        idx = order.view(M, n_max, *([1] * (x.dim() - 2))).expand(M, n_max, *x.shape[2:])
        return torch.gather(x, 1, idx)

    return Samples(
        obs=take(batch.obs[:T]),
        actions=take(batch.actions),
        timestep=take(batch.timestep[:T]),
        mask=mask,
        advantages=take(advantages.to(torch.float32)),
        targets=None if targets is None else take(targets),
    )
