"""The estimator interface and its registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch import Tensor

from steinrl.registry import Option, Registry, unit_interval

if TYPE_CHECKING:
    from steinrl.rl.critics import Critic
    from steinrl.rl.rollout import Batch

__all__ = ["Advantages", "Estimator", "ESTIMATORS", "DISCOUNT", "NORMALIZE_ADVANTAGES"]

DISCOUNT = Option("discount", float, 0.99, "Discount factor gamma.", check=unit_interval)
NORMALIZE_ADVANTAGES = Option("normalize_advantages", bool, True,
                              "Standardise advantages (returns, for reinforce) per particle batch.")


@dataclass
class Advantages:
    """What an estimator computes from a rollout, time-major ``(T, M, E)``."""

    advantages: Tensor  # (T, M, E) float64; 0 where the step is not valid
    value_targets: Tensor | None = None  # (T, M, E) float64 regression targets of the critic
    explained_variance: Tensor | None = None  # (M,): of the critic's values before fitting (NaN: constant targets)


class Estimator:
    """Base class: per-particle advantages and the surrogate J(θ_i).

    :param options: the values of the subclass's declared :attr:`options`.

    Class attributes a subclass may set: ``options`` (its config section), ``uses_critic``
    (a critic from :data:`steinrl.rl.critics.CRITICS` is built and passed in),
    ``needs_old_log_prob`` (the update passes the log-probs of the sampling policy to
    :meth:`surrogate`), and the instance attributes ``epochs`` (passes over the batch) and
    ``minibatches`` (particle updates per pass, each on its own random part of every
    particle's samples; 1: one update on the whole batch).

    The update also reads these options where an estimator declares them (PPO does): ``ent_coef``
    (entropy bonus), ``max_grad_norm`` (per-particle gradient clipping), ``anneal_lr``,
    ``scale_rewards`` / ``reward_clip`` (reward scaling); see :meth:`option`.
    """

    options: tuple[Option, ...] = ()
    uses_critic = False
    needs_old_log_prob = False
    job = "rl"  #: the kind of run this estimator belongs to (see steinrl.run.algos)

    def __init__(self, **options: Any) -> None:
        declared = {o.name for o in self.options}
        unknown = sorted(set(options) - declared)
        if unknown:
            raise TypeError(f"{type(self).__name__} does not take {unknown}; its options are {sorted(declared)}")
        self.config = {o.name: options.get(o.name, o.default) for o in self.options}
        self.epochs = 1
        self.minibatches = 1

    def option(self, name: str, default: Any = None) -> Any:
        """The value of option ``name``, or ``default`` if this estimator does not declare it."""
        return self.config.get(name, default)

    def advantages(self, batch: Batch, critic: Critic | None) -> Advantages:
        """Advantages of every valid step of ``batch`` (and the critic's targets)."""
        raise NotImplementedError

    def diagnostics(self, log_prob: Tensor, old_log_prob: Tensor | None, mask: Tensor) -> dict[str, Tensor]:
        """Per-particle ``(M,)`` scalars of one update step to log under ``train/`` (none by default)."""
        return {}

    def surrogate(self, log_prob: Tensor, old_log_prob: Tensor | None, advantages: Tensor, mask: Tensor) -> Tensor:
        """J(θ_i) ``(M,)``: the per-step mean over each particle's valid samples of log π · Â.

        :param log_prob: ``(M, n)`` log π_θ(a|s) of the compacted samples (differentiable).
        :param old_log_prob: ``(M, n)`` log-probs under the sampling policy (if requested).
        :param advantages: ``(M, n)``.
        :param mask: ``(M, n)`` 1 for real samples, 0 for padding.
        """
        return (log_prob * advantages * mask).sum(1) / mask.sum(1).clamp_min(1.0)


#: RL estimators by name (bandit algorithms register theirs in steinrl.bandits).
ESTIMATORS: Registry[type[Estimator]] = Registry("estimator")
