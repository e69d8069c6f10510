"""The bandit agent interface, the history of played rounds, and the agent registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from steinrl.registry import Registry

if TYPE_CHECKING:
    from steinrl.bandits.settings import BanditConfig

__all__ = ["BanditAgent", "History", "AGENTS"]


@dataclass
class History:
    """The rounds played so far (views into the run's stream; ``n`` rows)."""

    contexts: np.ndarray  # (n, d) float32
    arms: np.ndarray  # (n,) int64: the pulled arm of each round
    rewards: np.ndarray  # (n,) float64: the observed reward of the pulled arm

    def __len__(self) -> int:
        return len(self.arms)


class BanditAgent:
    """Base class: chooses arms for contexts and learns from the rounds played.

    The job calls, for every block of rounds between two refits, :meth:`act` on the block's
    contexts (or once per round if :attr:`per_round` — agents whose posterior changes
    with every observation), then :meth:`observe` on what was played, then :meth:`refit`
    on the whole history.

    :param cfg: the resolved config.
    :param num_arms: k.
    :param context_dim: d.
    """

    #: the config sections this agent reads: section -> its settings class
    sections: ClassVar[dict[str, type]] = {}
    #: act and observe one round at a time
    per_round: ClassVar[bool] = False

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int) -> None:
        self.cfg, self.num_arms, self.context_dim = cfg, num_arms, context_dim

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Arms ``(B,)`` int64 for contexts ``(B, d)``."""
        raise NotImplementedError

    def observe(self, contexts: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        """The rounds just played: contexts ``(B, d)``, arms ``(B,)``, their rewards ``(B,)``."""

    def refit(self, history: History, step: int) -> dict[str, float]:
        """Learn from ``history`` after block ``step``; returns scalars to log under ``train/``."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any], history: History) -> None:
        """Restore; ``history`` holds the rounds played up to the checkpoint."""


#: Bandit agents by name: ``ts`` (Stein Thompson sampling, any particle method:
#: ``s2vgd-ts``) and the stand-alone baselines (``uniform``, ``greedy``, ...).
AGENTS: Registry[type[BanditAgent]] = Registry("bandit agent")
