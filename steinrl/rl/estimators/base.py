"""The estimator interface, its registry, and the one-step update REINFORCE and A2C share.

An estimator is a small algorithm class (SB3's shape, with the particle axis): typed settings
(a dataclass whose fields are the ``estimator`` config section), the advantages of a rollout
(:meth:`Estimator.advantages`) and its own :meth:`Estimator.update`, which moves the particles
through the agent's particle optimizer (:meth:`~steinrl.rl.agent.SVPGAgent.step`: α, the prior,
clipping, the Stein direction and the optimizer in one place). Adding one is a module here with
a class registered in :data:`ESTIMATORS` (see ``ppo.py``) plus its import in ``__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from steinrl.registry import Option, Registry, setting, settings_options, unit_interval
from steinrl.rl.diagnostics import UpdateStats

if TYPE_CHECKING:
    from steinrl.rl.agent import SVPGAgent
    from steinrl.rl.critics import Critic
    from steinrl.rl.rollout import Batch

__all__ = ["Advantages", "Estimator", "ESTIMATORS", "EstimatorSettings", "masked_mean", "summarize"]


@dataclass(frozen=True)
class EstimatorSettings:
    """What every estimator takes (the ``estimator`` config section)."""

    discount: float = setting(0.99, "Discount factor gamma.", check=unit_interval)
    normalize_advantages: bool = setting(True, "Standardise advantages (returns, for reinforce) per particle batch.")


@dataclass
class Advantages:
    """What an estimator computes from a rollout, time-major ``(T, M, E)``."""

    advantages: Tensor  # (T, M, E) float64; 0 where the step is not valid
    value_targets: Tensor | None = None  # (T, M, E) float64 regression targets of the critic
    explained_variance: Tensor | None = None  # (M,): of the critic's values before fitting (NaN: constant targets)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Per particle, the mean of ``x`` ``(M, n)`` over its real samples (``mask`` 1) ``(M,)``."""
    return (x * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def summarize(steps: list[dict[str, Tensor]], advantages: Advantages, value_loss: Tensor | None) -> UpdateStats:
    """An update's statistics from its logged steps (each a dict of ``(M,)`` tensors, and the
    particle optimizer's ``direction`` and ``log_prior``): the means over the steps, the last
    step's direction info and log prior, and the critic's value loss ``(M,)`` (a fit of its
    own; else the joint steps' mean)."""
    mean = {k: torch.stack([s[k] for s in steps]).mean(0) for k in steps[-1] if k not in ("direction", "log_prior")}
    joint_loss = mean.pop("value_loss", None)
    return UpdateStats(surrogate=mean.pop("surrogate"), log_prior=steps[-1]["log_prior"], entropy=mean.pop("entropy"),
                       direction=steps[-1]["direction"], explained_variance=advantages.explained_variance,
                       value_loss=value_loss if value_loss is not None else joint_loss, extra=mean)


class Estimator:
    """Base class: per-particle advantages and the update, one particle step on the whole batch.

    :param settings: the ``estimator`` section as the subclass's :attr:`Settings` (default: its defaults).
    :param groups: seeds trained as one batch (G groups of M particles).
    :param device: where the estimator's own state lives (the agent's device).

    Class attributes: ``Settings`` (a frozen dataclass of :func:`~steinrl.registry.setting`
    fields; :attr:`options` is derived from it), ``uses_critic`` (a critic from
    :data:`steinrl.rl.critics.CRITICS` is built and passed in).
    """

    Settings: ClassVar[type] = EstimatorSettings
    options: ClassVar[tuple[Option, ...]] = settings_options(EstimatorSettings)
    uses_critic: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.options = settings_options(cls.Settings)

    def __init__(self, settings: Any = None, groups: int = 1, device: torch.device | str = "cpu") -> None:
        self.settings = self.Settings() if settings is None else settings
        if not isinstance(self.settings, self.Settings):
            raise TypeError(f"{type(self).__name__} takes {self.Settings.__name__}, got {type(self.settings).__name__}")
        self.groups, self.device = int(groups), torch.device(device)

    def advantages(self, batch: Batch, critic: Critic | None) -> Advantages:
        """Advantages of every valid step of ``batch`` (and the critic's targets)."""
        raise NotImplementedError

    @property
    def max_grad_norm(self) -> float | None:
        """The norm each particle's gradient of J is clipped to by the particle step (None: no clipping)."""
        return None

    def lr_fraction(self, progress: float) -> float:
        """The share of the configured step sizes to use once ``progress`` (the fraction of the run
        done before this update) is done; the agent applies it before :meth:`update`. 1: constant."""
        return 1.0

    def update(self, agent: SVPGAgent, batch: Batch, iteration: int) -> UpdateStats:
        """One particle step on the whole batch (REINFORCE, A2C).

        The advantages ``(T, M, E)`` -> every particle's valid samples, compacted to ``(M, n, ...)``
        -> J(θ_i) = the per-step mean over its samples of log π_θi(a|s) · Â -> the agent's particle
        step. A critic with a fit of its own regresses its targets on the same samples, beside the
        step (``critic.overlap``) or after it. Every random number comes through ``agent.draws``,
        and nothing here reads a value back to the host: on a device the update can be replayed
        as a CUDA graph.
        """
        advantages = self.advantages(batch, agent.critic)
        data, samples = agent.samples(batch, advantages, iteration)
        with agent.critic_fit(data, iteration) as fit, agent.policy.obs_norm.bypassed():
            log_prob, entropy = agent.log_prob(samples)
            surrogate = masked_mean(log_prob * samples["advantages"], samples["mask"])  # (M,)
            step = agent.step(surrogate, samples)
        return summarize([{**step, "surrogate": surrogate.detach(), "entropy": entropy.detach()}], advantages,
                         fit.value_loss)

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Any]:
        """Seed ``group``'s estimator state (e.g. running statistics) for checkpoints; none by default."""
        return {}

    def load_state_dict(self, states: list[dict[str, Any]]) -> None:
        """Continue from one :meth:`state_dict` per seed."""


#: RL estimators by name.
ESTIMATORS: Registry[type[Estimator]] = Registry("estimator")
