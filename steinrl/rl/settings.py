"""What an RL run's config holds, typed: its top-level options and the settings its sections are
composed of (:meth:`steinrl.rl.job.PolicyGradientJob.sections` composes them per algorithm).

Every section is a frozen dataclass of :func:`~steinrl.registry.setting` s, an instance of each
part's own settings class it is made of: ``cfg.update`` is the particle optimizer's
:class:`~steinrl.core.particle_optimizer.OptimizerSettings` and the coupling's
(:class:`~steinrl.core.couplings.SteinSettings`), ``cfg.policy`` the policy's
:class:`~steinrl.rl.policy.PolicySettings` and every head's, ``cfg.prior`` its :class:`PriorChoice`,
the prior's own settings and :class:`PriorWeight`. :class:`RLConfig` says what the RL job and its
parts read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from steinrl.core.layers import LayerSettings
from steinrl.core.particle_optimizer import OptimizerSettings
from steinrl.core.priors import PRIORS
from steinrl.job import RunConfig
from steinrl.registry import Option, at_least_one, non_negative, positive, setting, unit_interval
from steinrl.rl.critics import CRITICS
from steinrl.rl.policy import PolicySettings
from steinrl.rl.rollout import RolloutSettings

__all__ = ["RL_OPTIONS", "RL_LAYER_DEFAULTS", "EstimatorSettings", "PriorChoice", "PriorWeight", "CriticChoice",
           "PriorSection", "CriticSection", "RLConfig"]

#: Top-level options of RL runs (besides the Trainer's own).
RL_OPTIONS: tuple[Option, ...] = (
    Option("iterations", int, 1000, "Number of iterations (total, also when resuming); ignored when total_steps "
           "is set.", check=at_least_one),
    Option("total_steps", (int, None), None, "Stop once the run has taken this many env steps, all particles "
           "together (SB3's total_timesteps; the iteration that crosses it is completed); null: iterations "
           "decide.", check=at_least_one),
    Option("max_seconds", (float, None), None, "Stop after the iteration that takes the run's training time "
           "(summed over resumes) past this many seconds; null: no limit.", check=positive),
    # α = 10, the papers'; the swing-up tasks' configs set 15, measured best there
    # (research/results/temperature.md).
    Option("temperature", float, 10.0, "The temperature α: the target is exp(J / α) p(θ).", check=positive),
)

#: Layer defaults of the RL algorithms of a method, over the method's own (the paper's),
#: each set by a measurement (research/results/swingup_10seeds.md); ``--preset paper`` restores the paper's.
#: s2vgd: Λ fixed at 1, since the paper's prior shrinks a learned Λ and fails the swing-up
#: (research/results/swingup_10seeds.md#defaults-that-followed).
RL_LAYER_DEFAULTS: dict[str, dict[str, Any]] = {"s2vgd": {"scales": False}}


@dataclass(frozen=True)
class EstimatorSettings:
    """What every estimator takes (the ``estimator`` config section)."""

    discount: float = setting(0.99, "Discount factor gamma.", check=unit_interval)
    normalize_advantages: bool = setting(True, "Standardise advantages (returns, for reinforce) per particle batch.")


@dataclass(frozen=True)
class PriorChoice:
    """Which prior the ``prior`` section configures."""

    name: str = setting("gaussian", "Prior on the weight groups.", choices=PRIORS.names)


@dataclass(frozen=True)
class PriorWeight:
    """The RL target's weight of the prior."""

    weight: float | None = setting(
        None, "Weight w of log p(θ) in the target J / α + w log p (α: the temperature); null: 1 / (α * batch_size), "
        "one step's worth of tempered likelihood.", kind=(float, None), check=non_negative)


@dataclass(frozen=True)
class CriticChoice:
    """Which critic the ``critic`` section configures."""

    name: str = setting("mlp", "The critic of a2c / ppo.", choices=CRITICS.names)


class PriorSection(Protocol):
    """What the RL job reads of the ``prior`` section (its prior's own settings besides)."""

    name: str
    weight: float | None


class CriticSection(Protocol):
    """What the RL job reads of the ``critic`` section (its critic's own settings besides)."""

    name: str


class RLConfig(RunConfig, Protocol):
    """A resolved config of an RL algorithm (``<method>-<estimator>``), as the RL job reads it."""

    iterations: int
    total_steps: int | None
    max_seconds: float | None
    temperature: float
    rollout: RolloutSettings
    policy: PolicySettings
    layer: LayerSettings
    prior: PriorSection
    update: OptimizerSettings
    estimator: EstimatorSettings
    critic: CriticSection  # (an estimator with a critic)
