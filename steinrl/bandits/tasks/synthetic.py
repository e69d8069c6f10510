"""Synthetic bandits: the wheel, linear and sparse linear arms (Showdown's synthetic_data_sampler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from steinrl.bandits.tasks.base import BANDIT_TASKS, BanditData, BanditTask, TaskSettings
from steinrl.errors import ConfigError
from steinrl.registry import at_least_one, compose, positive, setting, settings_options

__all__ = ["Linear", "SparseLinear", "Wheel"]


def _open_interval(value: float) -> str | None:
    return None if 0.0 < value < 1.0 else "must be in (0, 1)"


@dataclass(frozen=True)
class WheelSettings(TaskSettings):
    """The ``task`` section of the wheel bandit."""

    delta: float = setting(0.5, "Radius beyond which a quadrant's arm pays 50 (0.5 ... 0.99).", check=_open_interval)


@BANDIT_TASKS.register("Wheel")
class Wheel(BanditTask):
    """The wheel bandit (Showdown section 5): contexts uniform in the unit disc, 5 arms.

    Arm 4 is the safe arm, always N(1.2, σ²). Arms 0..3 give N(1.0, σ²), except that where
    ‖x‖ ≥ ``delta`` the arm of x's quadrant gives N(50, σ²): arm 0 for x₁ > 0, x₂ > 0; 1 for
    x₁ > 0, x₂ ≤ 0; 2 for x₁ ≤ 0, x₂ > 0; 3 for x₁ ≤ 0, x₂ ≤ 0 (Showdown's order and its
    ``>=`` at the boundary). σ = 0.01. The outer ring holds a fraction 1 − δ² of the contexts,
    so a bigger δ makes exploration harder.
    """

    name = "Wheel"
    MEAN_REWARDS: ClassVar[tuple[float, ...]] = (1.0, 1.0, 1.0, 1.0, 1.2)
    LARGE_REWARD: ClassVar[float] = 50.0
    REWARD_STD: ClassVar[float] = 0.01
    SAFE_ARM: ClassVar[int] = 4
    context_bounds = (-1.0, 1.0)
    Settings = WheelSettings
    options = settings_options(Settings)

    def __init__(self, delta: float = 0.5) -> None:
        self.delta = float(delta)
        self.check_options(vars(self))
        self.num_arms, self.context_dim = len(self.MEAN_REWARDS), 2

    def sample(self, n: int, rng: np.random.Generator) -> BanditData:
        radius, angle = np.sqrt(rng.random(n)), 2.0 * np.pi * rng.random(n)
        contexts = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1).astype(np.float32)
        x1, x2 = contexts.astype(np.float64).T  # decide on the float32 contexts the agent sees
        outer = np.hypot(x1, x2) >= self.delta
        quadrant = np.where(x1 > 0, np.where(x2 > 0, 0, 1), np.where(x2 > 0, 2, 3))
        expected_rewards = np.tile(np.asarray(self.MEAN_REWARDS), (n, 1))
        expected_rewards[outer, quadrant[outer]] = self.LARGE_REWARD
        rewards = expected_rewards + self.REWARD_STD * rng.standard_normal((n, self.num_arms))
        return BanditData(contexts=contexts, expected_rewards=expected_rewards, rewards=rewards)


# --------------------------------------------------------------------------- linear


@dataclass(frozen=True)
class LinearSettings(TaskSettings):
    """The ``task`` section of the linear bandit."""

    dim: int = setting(10, "Context dimension d.", check=at_least_one)
    arms: int = setting(8, "Number of arms k.", check=at_least_one)
    noise_std: float | None = setting(
        None, "Reward noise std of every arm (null: 0.01*(a+1), Showdown's).",
        kind=(float, None), check=positive)
    seed: int = setting(0, "Seed of the arms' parameters β (the task's identity, not the rounds').")


@BANDIT_TASKS.register("Linear")
class Linear(BanditTask):
    """Linear arms (Showdown's ``sample_linear_data``): r = xᵀβ_a + N(0, s_a²), x ~ N(0, I_d).

    The parameters :attr:`betas` ``(k, d)`` are drawn once from the task's own ``seed``: each
    entry uniform in [−1, 1], each β_a scaled to unit norm; they stay fixed while rounds are
    sampled. Noise std s_a: ``noise_std`` for every arm, or by default Showdown's 0.01·(a + 1).
    """

    name = "Linear"
    Settings = LinearSettings
    options = settings_options(Settings)

    def __init__(self, dim: int = 10, arms: int = 8, noise_std: float | None = None, seed: int = 0) -> None:
        self.dim, self.arms, self.noise_std, self.seed = dim, arms, noise_std, seed
        self.check_options(vars(self))
        self.num_arms, self.context_dim = arms, dim
        self.noise_stds = (0.01 * np.arange(1, arms + 1) if noise_std is None else np.full(arms, float(noise_std)))
        self.betas = self._draw_betas(np.random.default_rng(seed))

    def _draw_betas(self, rng: np.random.Generator) -> np.ndarray:
        """``(k, d)`` unit-norm rows, entries uniform in [−1, 1] before scaling."""
        betas = rng.uniform(-1.0, 1.0, (self.arms, self.dim))
        return betas / np.linalg.norm(betas, axis=1, keepdims=True)

    def sample(self, n: int, rng: np.random.Generator) -> BanditData:
        contexts = rng.standard_normal((n, self.dim)).astype(np.float32)
        expected_rewards = contexts.astype(np.float64) @ self.betas.T
        rewards = expected_rewards + self.noise_stds * rng.standard_normal((n, self.arms))
        return BanditData(contexts=contexts, expected_rewards=expected_rewards, rewards=rewards)


@dataclass(frozen=True)
class _Nonzero:
    nonzero: int = setting(3, "Non-zero coordinates per arm's β (at most dim).", check=at_least_one)


@BANDIT_TASKS.register("SparseLinear")
class SparseLinear(Linear):
    """:class:`Linear` with only ``nonzero`` non-zero coordinates in each β_a, at random places
    (Showdown's ``sample_sparse_linear_data``: k = 7, d = 10, ⌊d/3⌋ = 3 non-zeros)."""

    name = "SparseLinear"
    Settings = compose("SparseLinearSettings", LinearSettings, _Nonzero, defaults={"arms": 7})
    options = settings_options(Settings)

    def __init__(self, dim: int = 10, arms: int = 7, noise_std: float | None = None, seed: int = 0,
                 nonzero: int = 3) -> None:
        if nonzero > dim:
            raise ConfigError(f"bandit task SparseLinear: task.nonzero must be at most dim = {dim}, got {nonzero}")
        self.nonzero = nonzero
        super().__init__(dim=dim, arms=arms, noise_std=noise_std, seed=seed)

    def _draw_betas(self, rng: np.random.Generator) -> np.ndarray:
        support = np.argsort(rng.random((self.arms, self.dim)), axis=1)[:, :self.nonzero]  # k nonzero
        mask = np.zeros((self.arms, self.dim))
        np.put_along_axis(mask, support, 1.0, axis=1)
        betas = mask * rng.uniform(-1.0, 1.0, (self.arms, self.dim))
        return betas / np.linalg.norm(betas, axis=1, keepdims=True)
