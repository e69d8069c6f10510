"""Priors over groups of particle parameters (S²VGD paper, eq. 14; docs/algorithms.md#priors-and-the-prior-weight).

A model exposes its parameters as named *groups* (``{"0.C": (M, n), "0.bias": (M, n'), ...}``,
see :meth:`steinrl.core.ensemble.EnsembleMLP.prior_groups`). A prior scores all groups of
every particle at once: ``prior.log_prob(groups) -> (M,)``.

- :class:`GaussianPrior` (``gaussian``): entries i.i.d. N(0, variance), the variance fixed
  (the papers' RL setting uses 0.01).
- :class:`InvGammaPrior` (``invgamma``): the hierarchical prior of eq. 14 — each group's
  variance s² ~ Inv-Gamma(a, b), entries | s² ~ N(0, s²) — with s² integrated out in
  closed form (a multivariate Student-t per group). Nothing is learned.
- :class:`JointGammaPrior` (``joint``): the same hierarchy kept *joint*, as the S²VGD
  paper's regression experiments do: each group's precision λ_g ~ Gamma(a, rate b) is a
  per-particle parameter, stored as log λ_g in ``log_precision (M, G)``, which joins the
  particle vector (:meth:`Prior.hyperparameters`).

Priors are :class:`torch.nn.Module` so that learned hyperparameters travel with
``state_dict``; the fixed ones hold no parameters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, options_of, positive, setting, settings_options, settings_values

__all__ = ["PriorSettings", "GaussianPriorSettings", "HyperpriorSettings", "Prior", "GaussianPrior", "InvGammaPrior",
           "JointGammaPrior", "PRIORS", "make_prior", "log_gamma_prior"]

_LOG_2PI = math.log(2.0 * math.pi)


def log_gamma_prior(log_x: Tensor, a: float, b: float, x: Tensor | None = None) -> Tensor:
    """The Gamma hyper-prior on a learned precision, in its log: the log density of u = log x
    for x ~ Gamma(shape a, rate b), the Jacobian x included, elementwise (same shape as ``log_x``)::

        log p(u) = a·log b − lgamma(a) + a·u − b·e^u

    (the precisions of :class:`JointGammaPrior`, the bandit models' and the BNN regression's
    noise precisions). ``x``: e^u if the caller has it already."""
    return a * math.log(b) - math.lgamma(a) + a * log_x - b * (log_x.exp() if x is None else x)


def _check_group(x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"a prior group must have shape (M, n), got {tuple(x.shape)}")


@dataclass(frozen=True)
class PriorSettings:
    """A prior's own options in the ``prior`` config section (none: the base)."""


@dataclass(frozen=True)
class GaussianPriorSettings(PriorSettings):
    variance: float = setting(0.01, "Variance of the zero-mean Gaussian prior.", check=positive)


@dataclass(frozen=True)
class HyperpriorSettings(PriorSettings):
    """The hyper-prior of the hierarchical priors (``invgamma``, ``joint``)."""

    a: float = setting(1.0, "Shape a of the hyper-prior on each group's variance / precision.", check=positive)
    b: float = setting(0.1, "Scale (Inv-Gamma) / rate (Gamma) b of the hyper-prior.", check=positive)


class Prior(nn.Module):
    """Base class: a log density over a model's named parameter groups.

    Subclasses with independent groups implement :meth:`log_prob_group`; the default
    :meth:`log_prob` sums it over the groups. ``Settings`` (a frozen dataclass of
    :func:`~steinrl.registry.setting` s, each an ``__init__`` keyword) are its options in the
    ``prior`` config section (``options`` is derived from it).
    """

    Settings: ClassVar[type] = PriorSettings
    options: ClassVar[tuple[Option, ...]] = ()

    def log_prob_group(self, x: Tensor) -> Tensor:
        """log p of one group ``x (M, n)`` per particle, ``(M,)``."""
        raise NotImplementedError

    def log_prob(self, groups: Mapping[str, Tensor]) -> Tensor:
        """Sum of the log densities of all ``groups`` (name -> ``(M, n)``), ``(M,)``."""
        total = None
        for x in groups.values():
            lp = self.log_prob_group(x)
            total = lp if total is None else total + lp
        if total is None:
            raise ValueError("a prior needs at least one parameter group")
        return total

    def hyperparameters(self) -> list[nn.Parameter]:
        """Its learned hyperparameters, per particle (leading dim M): they join the particle vector."""
        return list(self.parameters())


class GaussianPrior(Prior):
    """Isotropic Gaussian prior N(0, variance·I) on each group.

    :param variance: the fixed prior variance σ² (> 0); 0.01 in the papers' RL runs.
    """

    Settings = GaussianPriorSettings
    options = settings_options(Settings)

    def __init__(self, variance: float = 0.01) -> None:
        super().__init__()
        if not variance > 0:
            raise ValueError(f"variance must be > 0, got {variance}")
        self.variance = float(variance)

    def log_prob_group(self, x: Tensor) -> Tensor:
        """log N(x; 0, σ²I) = −n/2·log(2πσ²) − ‖x‖²/(2σ²), ``(M,)`` for ``x (M, n)``."""
        _check_group(x)
        n = x.shape[1]
        sq_norm = x.square().sum(dim=1)  # M
        return -0.5 * n * (_LOG_2PI + math.log(self.variance)) - 0.5 * sq_norm / self.variance

    def extra_repr(self) -> str:
        return f"variance={self.variance}"


class InvGammaPrior(Prior):
    """Hierarchical Gaussian prior with an Inv-Gamma(a, b) group variance, marginalised.

    Model (S²VGD paper, eq. 14): s² ~ Inv-Gamma(a, b); x_k | s² ~ N(0, s²) for the n
    entries of the group. Integrating s² out gives the closed form (a multivariate
    Student-t with 2a degrees of freedom and scale² b/a)::

        log p(x) = lgamma(a + n/2) − lgamma(a) + a·log b − (n/2)·log(2π)
                   − (a + n/2)·log(b + ‖x‖²/2)

    :param a: Inv-Gamma shape (> 0); 1.0 in the paper.
    :param b: Inv-Gamma scale (> 0); 0.1 in the paper.
    """

    Settings = HyperpriorSettings
    options = settings_options(Settings)

    def __init__(self, a: float = 1.0, b: float = 0.1) -> None:
        super().__init__()
        if not (a > 0 and b > 0):
            raise ValueError(f"a and b must be > 0, got a={a}, b={b}")
        self.a = float(a)
        self.b = float(b)

    def log_prob_group(self, x: Tensor) -> Tensor:
        """The closed-form marginal above, ``(M,)`` for ``x (M, n)``."""
        _check_group(x)
        n = x.shape[1]
        a, b = self.a, self.b
        const = math.lgamma(a + 0.5 * n) - math.lgamma(a) + a * math.log(b) - 0.5 * n * _LOG_2PI
        sq_norm = x.square().sum(dim=1)  # M
        return const - (a + 0.5 * n) * torch.log(b + 0.5 * sq_norm)

    def extra_repr(self) -> str:
        return f"a={self.a}, b={self.b}"


class JointGammaPrior(Prior):
    """Hierarchical prior with a learned per-particle precision per group (joint, not marginalised).

    For group g with n_g entries: λ_g ~ Gamma(a, rate b), x | λ_g ~ N(0, λ_g⁻¹ I). The
    parameter is u_g = log λ_g (so the density of u carries the Jacobian λ_g)::

        log p(x, u) = Σ_g [ (n_g/2)(u_g − log 2π) − e^{u_g} ‖x_g‖²/2
                            + a·log b − lgamma(a) + a·u_g − b·e^{u_g} ]

    :param groups: name -> number of entries of every group the prior will score (fixes G
        and the column of each group in ``log_precision``).
    :param num_particles: M.
    :param a: Gamma shape (> 0).
    :param b: Gamma rate (> 0).
    :param init_precision: initial λ of every group (default: the prior mean a / b).
    """

    Settings = HyperpriorSettings
    options = settings_options(Settings)

    shared_state = ("group_sizes",)  #: the groups' sizes: no particle axis (steinrl.core.groups)

    def __init__(self, groups: Mapping[str, int], num_particles: int, a: float = 1.0, b: float = 0.1,
                 init_precision: float | None = None) -> None:
        super().__init__()
        if not (a > 0 and b > 0):
            raise ValueError(f"a and b must be > 0, got a={a}, b={b}")
        self.a, self.b = float(a), float(b)
        self.group_names = list(groups)
        self.register_buffer("group_sizes", torch.tensor([float(groups[g]) for g in self.group_names]))
        lam = self.a / self.b if init_precision is None else float(init_precision)
        self.log_precision = nn.Parameter(torch.full((num_particles, len(self.group_names)), math.log(lam)))

    def log_prob(self, groups: Mapping[str, Tensor]) -> Tensor:
        if list(groups) != self.group_names:
            raise ValueError(f"JointGammaPrior was built for groups {self.group_names}, got {list(groups)}")
        sq_norm = torch.stack([x.square().sum(1) for x in groups.values()], dim=1)  # M G
        u = self.log_precision  # M G
        lam = u.exp()
        n = self.group_sizes  # G
        log_lik = 0.5 * n * (u - _LOG_2PI) - 0.5 * lam * sq_norm  # M G
        log_hyper = log_gamma_prior(u, self.a, self.b, lam)  # M G
        return (log_lik + log_hyper).sum(1)

    def extra_repr(self) -> str:
        return f"groups={len(self.group_names)}, a={self.a}, b={self.b}"


#: Priors by name; each class declares its own settings (``Settings``, ``options``).
PRIORS: Registry[type[Prior]] = Registry("prior")
PRIORS.register("gaussian", GaussianPrior)
PRIORS.register("invgamma", InvGammaPrior)
PRIORS.register("joint", JointGammaPrior)


def make_prior(name: str, groups: Mapping[str, int] | None = None, num_particles: int | None = None,
               settings: PriorSettings | None = None, **options: float) -> Prior:
    """Build a prior by name with its declared options: ``options``, or those ``settings`` hold
    (a ``prior`` config section: an instance of the prior's ``Settings``).

    :param groups: name -> size of the groups it will score (needed by ``joint``).
    :param num_particles: M (needed by ``joint``).
    """
    cls = PRIORS.get(name)
    if settings is not None:
        if not isinstance(settings, cls.Settings):
            raise TypeError(f"prior {name!r} takes {cls.Settings.__name__}, got {type(settings).__name__}")
        options = {**settings_values(settings, cls.Settings), **options}
    accepted = [o.name for o in options_of(cls)]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"prior {name!r} does not take {unknown}; its options are {accepted}")
    if cls is JointGammaPrior:
        if groups is None or num_particles is None:
            raise ValueError("the joint prior needs the model's groups and the number of particles")
        return cls(groups, num_particles, **options)
    return cls(**options)
