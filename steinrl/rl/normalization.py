"""Reward scaling: rewards divided by the running std of the discounted return (PPO's recipe).

As SB3's ``VecNormalize(norm_reward=True)`` and Gymnasium's ``NormalizeReward`` (Huang et
al. 2022, "The 37 implementation details of PPO", details 5-6): every env keeps a running
discounted return ``R_t = gamma R_{t-1} + r_t`` (restarted after an episode ends), its
running mean / variance are updated with every step's returns, and each reward is
replaced by ``clip(r_t / sqrt(var_t + eps), -clip, clip)``, ``var_t`` including step t.
Only the estimator sees the scaled rewards (advantages, value targets); logged episode
returns stay raw.

Here a batch is scaled after its rollout, in one pass: the returns by a forward scan
(:func:`~steinrl.rl.estimators.returns.running_returns`), the statistics at every step
by cumulative sums over the steps, which give the same pooled mean / variance as SB3's
step-by-step parallel update (to float64 rounding). The statistics are one per group of
particles (a seed: its particles share one reward scale, so the kernel sees one
temperature); the returns one per env, carried from batch to batch while its episode
continues. Both are state of the run (:meth:`RewardScaler.state_dict`).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from steinrl.rl.estimators.returns import running_returns
from steinrl.rl.rollout import Batch

__all__ = ["RewardScaler"]


class RewardScaler:
    """Running statistics of the discounted return, per group of particles.

    :param groups: G, groups of consecutive particles with their own statistics (seeds).
    :param gamma: discount of the running return (the estimator's).
    :param clip: scaled rewards are clipped to ``[-clip, clip]``.
    :param eps: added to the variance (SB3's 1e-8).
    :param device: where the statistics live.

    Statistics start as SB3's ``RunningMeanStd``: mean 0, variance 1, count 1e-4.
    """

    def __init__(self, groups: int, gamma: float, clip: float = 10.0, eps: float = 1e-8,
                 device: torch.device | str = "cpu") -> None:
        self.groups, self.gamma, self.clip, self.eps = int(groups), float(gamma), float(clip), float(eps)
        f64 = dict(dtype=torch.float64, device=device)
        self.mean = torch.zeros(self.groups, **f64)
        self.var = torch.ones(self.groups, **f64)
        self.count = torch.full((self.groups,), 1e-4, **f64)
        self.returns: Tensor | None = None  # (M, E) float64: each env's running return (set by the first batch)

    @torch.no_grad()
    def __call__(self, rewards: Tensor, valid: Tensor, done: Tensor, fresh: Tensor) -> Tensor:
        """Fold a batch into the statistics and return its scaled rewards.

        :param rewards: ``(T, M, E)`` raw rewards.
        :param valid: ``(T, M, E)`` bool, real transitions (the others are skipped).
        :param done: ``(T, M, E)`` bool, the episode ended at step t.
        :param fresh: ``(M, E)`` bool, the env's first observation starts an episode (its
            carried return is dropped).
        :return: ``(T, M, E)`` float32 scaled rewards (0 where not valid).
        """
        T, M, E = rewards.shape
        G = self.groups
        carried = None if self.returns is None else torch.where(fresh, 0.0, self.returns)
        ret = running_returns(rewards, valid, done, self.gamma, carried)  # T M E
        returns = torch.where((valid & done)[-1], 0.0, ret[-1]) if T else carried
        if self.returns is None or returns is None:
            self.returns = returns
        else:  # in place: the statistics keep their storage (a replayed graph reads them there)
            self.returns.copy_(returns)
        # the statistics after every step: moments of the returns about the current mean, cumulated
        w = valid.double().view(T, G, -1)
        x = (ret.view(T, G, -1) - self.mean[:, None]) * w
        n = self.count + w.sum(2).cumsum(0)  # T G
        s1 = x.sum(2).cumsum(0)
        s2 = self.count * self.var + x.square().sum(2).cumsum(0)
        mean = s1 / n  # about the old mean
        var = (s2 / n - mean.square()).clamp_min(0.0)  # T G
        scale = (var + self.eps).rsqrt().repeat_interleave(M // G, dim=1)[:, :, None]  # T M 1
        scaled = (rewards.double() * scale).clamp(-self.clip, self.clip)
        if T:
            self.mean.add_(mean[-1])
            self.var.copy_(var[-1])
            self.count.copy_(n[-1])
        return torch.where(valid, scaled, 0.0).to(torch.float32)

    def scale_batch(self, batch: Batch) -> Batch:
        """``batch`` with its rewards scaled (:meth:`__call__`; an env whose first observation
        starts an episode drops its carried return)."""
        rewards = self(batch.rewards, batch.valid, batch.done, batch.timestep[0] == 0)
        return dataclasses.replace(batch, rewards=rewards)

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Tensor]:
        """Group ``group``'s statistics and its envs' returns (of ``groups`` equal groups: the
        single-seed format whatever the number of seeds)."""
        state = {k: getattr(self, k)[group:group + 1].clone() for k in ("mean", "var", "count")}
        if groups == 1:
            state = {k: getattr(self, k).clone() for k in ("mean", "var", "count")}
        if self.returns is not None:
            size = self.returns.shape[0] // groups
            state["returns"] = self.returns[group * size:(group + 1) * size].clone()
        return state

    def load_state_dict(self, states: list[dict[str, Tensor]] | dict[str, Tensor]) -> None:
        """Continue from one :meth:`state_dict` per group (a single dict: one group)."""
        states = [states] if isinstance(states, dict) else list(states)
        if len(states) != self.groups:
            raise ValueError(f"reward scaling of {self.groups} group(s) needs as many states, got {len(states)}")
        device = self.mean.device
        self.mean, self.var, self.count = (torch.cat([s[k] for s in states]).to(device, torch.float64)
                                           for k in ("mean", "var", "count"))
        has = ["returns" in s for s in states]
        self.returns = torch.cat([s["returns"] for s in states]).to(device, torch.float64) if all(has) else None
