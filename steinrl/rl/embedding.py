"""The shared states of the particles' embedding: where a function-space kernel (or a spread
controller) compares the particles, by each one's action distribution on the same B states
(:meth:`~steinrl.rl.policy.EnsemblePolicy.embedding`)."""

from __future__ import annotations

import torch
from torch import Tensor

from steinrl.rl.draws import Draws

__all__ = ["shared_states"]


def shared_states(obs: Tensor, mask: Tensor, states: int, draws: Draws) -> Tensor:
    """B = ``states`` shared states ``(G·M, B, obs_dim)`` drawn for each seed from all its particles'
    compacted samples ``obs`` ``(G·M, n, obs_dim)`` (``mask`` ``(G·M, n)`` 1: a real one), uniformly
    without replacement among the real ones: the B smallest of uniform keys, real samples first. Where
    a seed holds fewer than B real samples (short episodes compacted), its real ones repeat in that
    order, so that padding is never drawn and B stays fixed (static shapes). Every particle of a seed
    gets the seed's set. The keys come through ``draws`` (``"function_keys"``, each seed's
    ``embedding`` stream)."""
    G = len(draws.seeds)
    M, (n, d) = obs.shape[0] // G, obs.shape[1:]
    keys = draws.per_seed("function_keys", "embedding",
                          lambda g: torch.rand(M * n, generator=g, device=draws.device)[None])  # (G, M n)
    real = mask.reshape(G, M * n) > 0
    ranked = torch.argsort(torch.where(real, keys, keys + 2.0), dim=1)  # (G, M n): real samples first
    held = real.sum(dim=1, keepdim=True).clamp(min=1)  # (G, 1)
    order = torch.gather(ranked, 1, torch.arange(states, device=keys.device)[None] % held)  # (G, B)
    picked = torch.gather(obs.reshape(G, M * n, d), 1, order[..., None].expand(G, states, d))  # (G, B, d)
    return picked[:, None].expand(G, M, states, d).reshape(G * M, states, d)
