"""A Gymnasium environment over any bandit task, one round per step."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from steinrl.bandits.tasks.base import BanditData, BanditTask

__all__ = ["BanditEnv"]


class BanditEnv(gym.Env):
    """One round per step of a :class:`BanditTask`, as a Gymnasium environment.

    Observation: the context, ``Box(context_dim)`` float32 within the task's ``context_bounds``.
    Action: the arm, ``Discrete(k)``. ``reset`` returns the first context and info
    ``{"expected_rewards" (k,), "optimal_arm"}`` for it; ``step(arm)`` returns the next context,
    the sampled reward of ``arm``, ``terminated=False``, ``truncated`` once ``horizon`` rounds
    were played, and info
    ``{"expected_rewards" (k,), "optimal_arm", "regret"}`` about the round just played.
    :attr:`expected_rewards` gives those of the context now awaiting an arm (for oracles).
    Rounds are drawn from ``self.np_random``, so ``reset(seed=s)`` replays the same rounds.

    :param horizon: rounds per episode (``None``: never truncated).
    """

    metadata = {"render_modes": []}

    def __init__(self, task: BanditTask, horizon: int | None = None) -> None:
        self.task, self.horizon = task, horizon
        self.observation_space = gym.spaces.Box(*task.context_bounds, (task.context_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(task.num_arms)
        self._round: BanditData | None = None
        self._rounds_played = 0

    @property
    def expected_rewards(self) -> np.ndarray:
        """``(k,)`` E[r | x, a] of the current context (the one the next ``step`` plays)."""
        if self._round is None:
            raise RuntimeError("call reset() first")
        return self._round.expected_rewards[0].copy()

    def _next_round(self) -> tuple[np.ndarray, dict[str, Any]]:
        self._round = self.task.sample(1, self.np_random)
        expected = self._round.expected_rewards[0]
        return self._round.contexts[0], {"expected_rewards": expected.copy(), "optimal_arm": int(expected.argmax())}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._rounds_played = 0
        return self._next_round()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._round is None:
            raise RuntimeError("call reset() before step()")
        arm = int(action)
        if not self.action_space.contains(arm):
            raise ValueError(f"arm {arm} is not in 0..{self.task.num_arms - 1}")
        expected = self._round.expected_rewards[0]
        reward = float(self._round.rewards[0, arm])
        info = {"expected_rewards": expected.copy(), "optimal_arm": int(expected.argmax()),
                "regret": float(expected.max() - expected[arm])}
        self._rounds_played += 1
        truncated = self.horizon is not None and self._rounds_played >= self.horizon
        context, _ = self._next_round()
        return context, reward, False, truncated, info
