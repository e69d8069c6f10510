"""The estimator interface, its registry, and what every estimator's update logs.

An estimator is a small algorithm class (SB3's shape, with the particle axis): typed settings
(a dataclass whose fields are the ``estimator`` config section), the advantages of a rollout
(:meth:`Estimator.advantages`) and its own :meth:`Estimator.learn`, one page in its own module:
the samples it trains on, the log-probabilities, the losses (a critic's value loss included) and
the particle step, ``agent.particle_optimizer.step`` (α, the prior, clipping, the Stein direction and the
optimizer in one place). It reads the agent (:class:`~steinrl.rl.agent.SVPGAgent`: policy, critic,
particle optimizer, finiteness flags) and draws every random number through the iteration's
:class:`~steinrl.rl.draws.Draws`. Adding one is a module here with a class registered in
:data:`ESTIMATORS` (see ``ppo.py``) plus its import in ``__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from steinrl.registry import Option, Registry, settings_options
from steinrl.rl.diagnostics import UpdateStats
from steinrl.rl.settings import EstimatorSettings

if TYPE_CHECKING:
    from steinrl.core.particle_optimizer import StepResult
    from steinrl.rl.agent import SVPGAgent
    from steinrl.rl.critics import Critic
    from steinrl.rl.draws import Draws
    from steinrl.rl.rollout import Batch

__all__ = ["Advantages", "Estimator", "ESTIMATORS", "EstimatorSettings", "logged", "masked_mean", "summarize"]


@dataclass
class Advantages:
    """What an estimator computes from a rollout, time-major ``(T, M, E)``."""

    advantages: Tensor  # (T, M, E) float64; 0 where the step is not valid
    value_targets: Tensor | None = None  # (T, M, E) float64 regression targets of the critic
    explained_variance: Tensor | None = None  # (M,): of the critic's values before fitting (NaN: constant targets)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Per particle, the mean of ``x`` ``(M, n)`` over its real samples (``mask`` 1) ``(M,)``."""
    return (x * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def logged(result: StepResult, value_loss: Tensor | None = None, **values: Tensor) -> dict[str, Any]:
    """What one particle step logs: its ``coupling_stats`` and ``log_prior``, a joint critic's
    ``value_loss``, the ``grad_norm`` (with clipping), then the estimator's ``values`` (each ``(M,)``)."""
    step: dict[str, Any] = {"coupling_stats": result.coupling_stats, "log_prior": result.log_prior}
    if value_loss is not None:
        step["value_loss"] = value_loss.detach()
    if result.grad_norm is not None:
        step["grad_norm"] = result.grad_norm
    return {**step, **values}


def summarize(steps: list[dict[str, Any]], advantages: Advantages, value_loss: Tensor | None) -> UpdateStats:
    """An update's statistics from its logged steps (:func:`logged`): the means over the steps,
    the last step's coupling stats and log prior, and the critic's value loss ``(M,)`` (a fit of
    its own; else the joint steps' mean)."""
    mean = {k: torch.stack([s[k] for s in steps]).mean(0) for k in steps[-1]
            if k not in ("coupling_stats", "log_prior")}
    joint_loss = mean.pop("value_loss", None)
    return UpdateStats(surrogate=mean.pop("surrogate"), log_prior=steps[-1]["log_prior"], entropy=mean.pop("entropy"),
                       coupling_stats=steps[-1]["coupling_stats"], explained_variance=advantages.explained_variance,
                       value_loss=value_loss if value_loss is not None else joint_loss, extra=mean)


class Estimator:
    """Base class: per-particle advantages and the update (:meth:`learn`).

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

    def __init__(self, settings: EstimatorSettings | None = None, groups: int = 1,
                 device: torch.device | str = "cpu") -> None:
        self.settings = self.Settings() if settings is None else settings
        if not isinstance(self.settings, self.Settings):
            raise TypeError(f"{type(self).__name__} takes {self.Settings.__name__}, got {type(self.settings).__name__}")
        self.groups, self.device = int(groups), torch.device(device)

    def advantages(self, batch: Batch, critic: Critic | None) -> Advantages:
        """Advantages of every valid step of ``batch`` (and the critic's targets)."""
        raise NotImplementedError

    @classmethod
    def host_reads(cls, settings: EstimatorSettings) -> list[str]:
        """Why :meth:`learn` with ``settings`` reads values back to the host within an iteration,
        which a replayed CUDA graph cannot (:func:`steinrl.rl.graph.graph_blockers`); none by default."""
        return []

    @property
    def max_grad_norm(self) -> float | None:
        """The norm each particle's gradient of J is clipped to by the particle step (None: no clipping)."""
        return None

    def lr_fraction(self, progress: float) -> float:
        """The share of the configured step sizes to use once ``progress`` (the fraction of the run
        done before this update) is done; the job sets the step sizes before :meth:`learn`. 1: constant."""
        return 1.0

    def learn(self, agent: SVPGAgent, batch: Batch, draws: Draws) -> UpdateStats:
        """Move ``agent``'s particles on ``batch`` (its step sizes set before); every random number
        through ``draws``. Nothing in it reads a value back to the host (but PPO's ``target_kl``):
        on a device a CUDA graph replays it."""
        raise NotImplementedError

    def persistent_tensors(self) -> dict[str, Tensor]:
        """The estimator's own tensors that an update reads from the last one (a replayed CUDA graph
        keeps their storage), by name; none by default."""
        return {}

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Any]:
        """Seed ``group``'s estimator state (e.g. running statistics) for checkpoints; none by default."""
        return {}

    def load_state_dict(self, states: list[dict[str, Any]]) -> None:
        """Continue from one :meth:`state_dict` per seed."""


#: RL estimators by name.
ESTIMATORS: Registry[type[Estimator]] = Registry("estimator")
