"""A batch's bookkeeping, vectorised over ``(T, N)`` after the steps (no per-step work).

The sampler's loop only steps the envs and writes the buffers (observations, actions,
rewards, terminated, truncated). Everything else is a function of those flags and is
computed here in a few whole-tensor operations, on whatever device the buffers live:

- ``prev_done[t]``: step ``t`` is a reset step (the env ended at ``t - 1``; next-step
  autoreset), never a valid transition;
- the whole-episode stopping rule (:class:`WholeEpisodeRule`): a particle's envs stop at
  their first episode boundary once the particle's valid steps reach the budget;
- ``valid``, each obs's step index in its episode, each completed episode's return and
  length, the per-particle statistics, and where every env stands at the end (carry-over).

``N = M * E`` envs, particle-major (env ``n`` belongs to particle ``n // E``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Start", "WholeEpisodeRule", "Bookkeeping", "bookkeeping", "NEVER"]

#: "not (yet)" for step indices
NEVER = torch.iinfo(torch.int64).max


@dataclass
class Start:
    """Where every env stands when a batch starts (fresh, or carried over from the last batch)."""

    obs: Tensor  # (N, obs_dim) float32
    prev_done: Tensor  # (N,) bool: the env's episode ended on the last step (its next step is a reset)
    ep_ret: Tensor  # (N,) float64: return of the episode in progress so far
    ep_len: Tensor  # (N,) int64: its valid steps so far
    tstep: Tensor  # (N,) int32: the obs's step index in its episode

    @classmethod
    def fresh(cls, obs: Tensor) -> Start:
        n, dev = obs.shape[0], obs.device
        return cls(obs, torch.zeros(n, dtype=torch.bool, device=dev), torch.zeros(n, dtype=torch.float64, device=dev),
                   torch.zeros(n, dtype=torch.int64, device=dev), torch.zeros(n, dtype=torch.int32, device=dev))


def previous_done(done: Tensor, first: Tensor) -> Tensor:
    """``prev_done (T, N)``: ``first`` then ``done[:-1]``."""
    return torch.cat([first[None], done[:-1]])


class WholeEpisodeRule:
    """The papers' stopping rule, advanced one block of steps at a time.

    An env starts a new episode only while its particle's valid steps so far (completed and
    in progress) are below ``budget``. Before the first step ``τ_p`` at which particle ``p``
    reaches the budget none of its envs has stopped, so its count is the running sum of its
    non-reset steps; from ``τ_p`` on, each of its envs stops at its next episode boundary
    (the step its episode ends, or a reset step). ``stop[n]`` is env ``n``'s last active step.

    :param M: particles; ``E``: envs per particle; ``budget``: valid steps per particle.
    """

    def __init__(self, M: int, E: int, budget: int, device: torch.device) -> None:
        self.M, self.E, self.budget = M, E, budget
        self.collected = torch.zeros(M, dtype=torch.int64, device=device)  # valid steps before the block
        self.tau = torch.full((M,), NEVER, dtype=torch.int64, device=device)  # step the budget is reached
        self.stop = torch.full((M * E,), NEVER, dtype=torch.int64, device=device)

    def advance(self, done: Tensor, prev_done: Tensor, t0: int) -> Tensor:
        """Fold steps ``t0 .. t0 + K - 1`` (``done``, ``prev_done`` ``(K, N)``) in; returns a
        0-dim bool tensor: every env has stopped."""
        K, M, E = done.shape[0], self.M, self.E
        steps = (~prev_done).view(K, M, E).sum(2)  # K M: non-reset (valid, before τ) steps
        reached = (self.collected + steps.cumsum(0)) >= self.budget  # K M
        first = reached.to(torch.uint8).argmax(0) + t0  # first maximal index: the first step reaching it
        self.tau = torch.minimum(self.tau, torch.where(reached.any(0), first, NEVER))
        self.collected += steps.sum(0)
        t = torch.arange(t0, t0 + K, device=done.device)[:, None]
        boundary = (done | prev_done) & (t >= self.tau.repeat_interleave(E)[None])  # K N
        first = boundary.to(torch.uint8).argmax(0) + t0
        self.stop = torch.minimum(self.stop, torch.where(boundary.any(0), first, NEVER))
        return (self.stop != NEVER).all()


@dataclass
class Bookkeeping:
    """What the flags of a batch imply, time-major ``(T, N)`` (see the module docstring)."""

    done: Tensor  # (T, N) bool
    valid: Tensor  # (T, N) bool
    timestep: Tensor  # (T + 1, N) int32: obs[t]'s step index in its episode
    ended: Tensor  # (T, N) bool: a valid step that ended an episode
    episode_return: Tensor  # (T, N) float64: at ended steps, the return of the episode (0 elsewhere)
    episode_length: Tensor  # (T, N) int64: at ended steps, its valid steps (0 elsewhere)
    stats: Tensor  # (3, M) float64: per particle the sum of its completed episodes' returns, lengths, count
    end: Start  # where every env stands after the batch (obs filled in by the caller)


def _since_last(mark: Tensor, values: Tensor, initial: Tensor) -> Tensor:
    """``values[t] - values[s]`` with ``s`` the last step ``< t`` where ``mark`` holds, or
    ``values[t] + initial`` where there is none (``(T, N)`` each; ``initial`` ``(N,)``)."""
    T = mark.shape[0]
    t = torch.arange(T, device=mark.device)[:, None]
    last = torch.where(mark, t, -1).cummax(0).values  # last marked step <= t
    before = torch.cat([torch.full_like(last[:1], -1), last[:-1]])  # ... < t
    base = torch.where(before >= 0, values.gather(0, before.clamp_min(0)), -initial.to(values.dtype)[None])
    return values - base


def bookkeeping(rewards: Tensor, terminated: Tensor, truncated: Tensor, start: Start, stop: Tensor | None,
                M: int) -> Bookkeeping:
    """Validity, episode indices and statistics of a batch of ``T`` steps of ``N`` envs.

    :param rewards: ``(T, N)`` float64.
    :param terminated: ``(T, N)`` bool; ``truncated`` likewise.
    :param start: the envs' state when the batch started.
    :param stop: ``(N,)`` each env's last active step (whole episodes), or None (all active).
    :param M: particles (``N = M * E``).
    """
    T, N = rewards.shape
    done = terminated | truncated
    prev_done = previous_done(done, start.prev_done)
    valid = ~prev_done
    if stop is not None:
        valid &= torch.arange(T, device=valid.device)[:, None] <= stop[None]
    ended = done & valid
    # Running sums within episodes: cumulative sums over the batch, less their value at the
    # previous episode end (the episode in progress at the start carries its sums in).
    ret = _since_last(ended, (rewards * valid).cumsum(0), start.ep_ret)  # (T, N) float64
    length = _since_last(ended, valid.to(torch.int64).cumsum(0), start.ep_len)
    episode_return = torch.where(ended, ret, 0.0)
    episode_length = torch.where(ended, length, 0)
    # obs[t + 1] starts an episode after a reset step t; otherwise one step further on.
    steps = torch.arange(1, T + 1, device=valid.device, dtype=torch.int32)[:, None]
    last_reset = torch.where(prev_done, steps, 0).cummax(0).values  # (T, N): obs index that started the episode
    started = last_reset > 0
    tstep_next = torch.where(started, steps - last_reset, start.tstep[None] + steps)  # obs[t + 1]'s index
    timestep = torch.cat([start.tstep[None], tstep_next.to(torch.int32)])
    per_particle = torch.stack([episode_return, episode_length.double(), ended.double()]).view(3, T, M, -1)
    stats = per_particle.sum((1, 3))
    last_end = torch.where(ended[-1], 0.0, ret[-1]), torch.where(ended[-1], 0, length[-1])
    end = Start(obs=start.obs, prev_done=done[-1].clone(), ep_ret=last_end[0], ep_len=last_end[1],
                tstep=timestep[-1].clone())
    return Bookkeeping(done, valid, timestep, ended, episode_return, episode_length, stats, end)
