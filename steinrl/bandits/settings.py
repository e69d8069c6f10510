"""What a bandit run's config holds, typed: the settings of its sections (the ``protocol``, the
agents' ``model``, ``likelihood`` and ``agent``, and for Stein Thompson sampling the method's
``layer``, ``prior`` and ``update``), composed per algorithm by
:meth:`steinrl.bandits.job.BanditJob.sections`, and :class:`BanditConfig`, what the bandit job and
its agents read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from steinrl.bandits.linear import NIGSettings
from steinrl.bandits.tasks.base import TaskSettings
from steinrl.bayes.base import PosteriorSettings
from steinrl.core.activations import ACTIVATIONS
from steinrl.core.couplings import CouplingSettings
from steinrl.core.layers import LayerSettings
from steinrl.core.particle_optimizer import OPTIMIZERS
from steinrl.core.priors import PRIORS
from steinrl.job import RunConfig
from steinrl.registry import at_least_one, non_negative, positive, setting, step_size, unit_interval

__all__ = ["ProtocolSettings", "ModelSettings", "LikelihoodSettings", "NoiseSettings", "EpsilonSettings",
           "BanditPriorChoice", "BanditPriorWeight", "BanditPriorSection", "BanditConfig"]


@dataclass(frozen=True)
class ProtocolSettings:
    """The ``protocol`` section: the refit protocol; the defaults are the Deep Bayesian Bandits Showdown's."""

    refit_every: int = setting(50, "Rounds between two refits of the agent (Showdown: 50).", check=at_least_one)
    refit_steps: int = setting(100, "Minibatch steps per refit (Showdown: 100).", check=at_least_one)
    minibatch: int = setting(512, "Rounds per minibatch, drawn with replacement from all rounds so far (512).",
                             check=at_least_one)
    optimizer: str = setting("rmsprop_tf", "Optimizer of the networks (rmsprop_tf: TensorFlow 1's RMSProp, as "
                             "Showdown; the particle step hands it -phi).", choices=lambda: list(OPTIMIZERS))
    lr: float = setting(0.1, "Initial learning rate (Showdown: 0.1).", check=step_size)
    lr_decay: float = setting(0.5, "Inverse-time decay: lr / (1 + lr_decay * t) over all steps t of the run.",
                              check=non_negative)
    max_grad_norm: float = setting(5.0, "Clip each particle's step to this norm (Showdown: 5).", check=positive)
    initial_pulls: int = setting(2, "Each arm is pulled this many times first, round-robin (Showdown: 2).",
                                 check=non_negative)


@dataclass(frozen=True)
class ModelSettings:
    """The ``model`` section: the reward network of the neural agents."""

    hidden: list[int] = setting([50], "Hidden layer sizes of the reward network.", kind=list[int],
                                check=at_least_one)
    activation: str = setting("relu", "Hidden activation of the reward network.",
                              choices=lambda: [a for a in ACTIVATIONS if a != "identity"])


@dataclass(frozen=True)
class NoiseSettings:
    """The ``likelihood`` section of the variational agents: the Gaussian reward noise."""

    noise_variance: float = setting(1.0, "σ² of the Gaussian reward likelihood.", check=positive)


@dataclass(frozen=True)
class LikelihoodSettings:
    """The ``likelihood`` section of Stein Thompson sampling: the reward noise, fixed or learned."""

    noise_variance: float = setting(1.0, "σ² of the Gaussian reward likelihood (the initial value if learned).",
                                    check=positive)
    learn_noise: bool = setting(False, "Learn a noise precision per arm and particle (a Gamma(a, b) prior; it joins "
                                "the particle vector).")
    noise_a: float = setting(1.0, "Gamma shape a of the prior on a learned noise precision.", check=positive)
    noise_b: float = setting(1.0, "Gamma rate b of the prior on a learned noise precision.", check=positive)


@dataclass(frozen=True)
class EpsilonSettings:
    """The ``agent`` section of ``egreedy``."""

    epsilon: float = setting(0.01, "Probability of a uniformly random arm (the S²VGD paper: 0.01, 0.03).",
                             check=unit_interval)


@dataclass(frozen=True)
class BanditPriorChoice:
    """Which prior a Stein Thompson sampler's ``prior`` section configures."""

    name: str = setting("gaussian", "Prior on the weight groups.", choices=PRIORS.names)


@dataclass(frozen=True)
class BanditPriorWeight:
    """The posterior's weight of the prior."""

    weight: float = setting(1.0, "Weight of log p(theta) in the log posterior.", check=non_negative)


class BanditPriorSection(Protocol):
    """What a Stein Thompson sampler reads of the ``prior`` section (its prior's own settings besides)."""

    name: str
    weight: float


class BanditConfig(RunConfig, Protocol):
    """A resolved config of a bandit algorithm (``<method>-ts`` or a baseline), as the bandit job
    and its agents read it; an agent reads only the sections it declares (``agent.sections``)."""

    rounds: int
    task: TaskSettings
    protocol: ProtocolSettings
    model: ModelSettings
    likelihood: LikelihoodSettings | NoiseSettings
    agent: EpsilonSettings | NIGSettings
    posterior: PosteriorSettings
    layer: LayerSettings
    prior: BanditPriorSection
    update: CouplingSettings
