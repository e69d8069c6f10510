"""Random minibatches of every particle's compacted samples ``(M, n, ...)``, all particles at once."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from steinrl.rl.draws import Draws

__all__ = ["minibatch_indices", "minibatch_keys", "take", "minibatches"]


def minibatch_keys(mask: Tensor, epochs: int, draws: Draws) -> Tensor:
    """Uniform keys ``(epochs, G·M, n)`` that shuffle the samples of ``mask`` ``(G·M, n)`` into
    minibatches (:func:`minibatch_indices`), epoch after epoch, through ``draws``
    (``"minibatch_keys"``): each seed's ``(n, M)`` per epoch from its own ``minibatches`` stream,
    transposed (column j's key is the same for any n > j)."""
    M, n = mask.shape[0] // len(draws.seeds), mask.shape[1]

    def draw(g: torch.Generator) -> Tensor:  # (epochs, M, n): one draw per epoch
        return torch.stack([torch.rand((n, M), generator=g, device=draws.device).T for _ in range(epochs)])

    return draws.per_seed("minibatch_keys", "minibatches", draw, dim=1)


def minibatch_indices(mask: Tensor, minibatches: int, keys: Tensor) -> tuple[Tensor, Tensor]:
    """A random partition of every particle's real samples into ``K = minibatches`` parts.

    Particle i's ``n_i`` real samples are shuffled and cut into K consecutive parts of
    ``floor(n_i / K)`` or ``ceil(n_i / K)`` samples (part k holds ranks ``[k n_i // K,
    (k + 1) n_i // K)``), so every particle has K minibatches of (almost) equal size whatever
    its ``n_i``; the batched minibatch is ``b = ceil(n / K)`` columns wide, padding masked.

    :param mask: ``(M, n)`` 1 for real samples, which come first in each row (as
        :func:`~steinrl.rl.samples.compact` lays them out).
    :param minibatches: K >= 1.
    :param keys: ``(M, n)`` uniform keys that order every particle's samples (drawn per group of
        particles, a seed, from its own stream, ``(n, M / G)`` then transposed: column j's key is
        the same for any n > j, so a group's shuffle depends only on its own stream and samples).
    :return: ``idx (K, M, b)`` column indices into the ``n`` samples and ``mask (K, M, b)``
        float, 1 where the column is one of the part's samples.
    """
    M, n = mask.shape
    K = int(minibatches)
    order = torch.argsort(torch.where(mask > 0, keys, 2.0), dim=1)  # real samples first, shuffled
    counts = mask.sum(1).long()  # M
    bounds = torch.arange(K + 1, device=mask.device)[:, None] * counts // K  # (K + 1, M)
    start, size = bounds[:-1], bounds[1:] - bounds[:-1]  # K M
    cols = torch.arange(-(-n // K), device=mask.device)
    rank = (start[..., None] + cols).clamp_max(n - 1)  # K M b
    idx = torch.gather(order.expand(K, M, n), 2, rank)
    return idx, (cols < size[..., None]).to(mask.dtype)


def take(x: Tensor, idx: Tensor) -> Tensor:
    """Columns ``idx (M, b)`` of ``x (M, n, ...)``: ``(M, b, ...)``. One ``index_select`` of the
    rows of ``x`` seen as ``(M·n, ...)`` (on CPU faster than ``gather`` with an expanded index)."""
    M, n = x.shape[:2]
    rows = (idx + torch.arange(M, device=idx.device).unsqueeze(1) * n).reshape(-1)
    return x.reshape(M * n, *x.shape[2:]).index_select(0, rows).view(*idx.shape, *x.shape[2:])


def minibatches(samples: dict[str, Tensor], K: int, keys: Tensor | None) -> Iterator[dict[str, Tensor]]:
    """One pass over ``samples`` (each ``(M, n, ...)``, with a ``mask``): K random minibatches
    ``(M, b, ...)`` ordered by ``keys`` ``(M, n)`` (:func:`minibatch_indices`); K = 1: the
    samples themselves, unshuffled (no keys)."""
    if K == 1:
        yield samples
        return
    idx, masks = minibatch_indices(samples["mask"], K, keys)
    for k in range(K):
        yield {**{name: take(x, idx[k]) for name, x in samples.items() if name != "mask"}, "mask": masks[k]}
