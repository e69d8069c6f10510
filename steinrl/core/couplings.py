"""Couplings, registered by name: how the particles are coupled, i.e. how their gradients become
their direction φ.

- ``stein``: the SVGD direction (:func:`steinrl.core.stein.svgd_direction`) under a Stein kernel
  (``update.kernel``, :mod:`steinrl.core.kernels`), in weight or function space
  (:func:`steinrl.core.function_space.function_space_direction`): each particle follows the
  kernel-weighted gradients of the others (attractive term) and is pushed away from them
  (repulsive term, weighted by ``update.repulsion``, :mod:`steinrl.core.repulsion`);
- ``independent``: κ = I, every particle follows its own gradient, the papers' baseline.

A coupling declares the settings it adds to the ``update`` config section (``Settings``; the
settings every method shares are the particle optimizer's,
:class:`steinrl.core.particle_optimizer.OptimizerSettings`)
and returns ``(phi, stats)`` from :meth:`Coupling.direction`, ``stats`` holding the logged
``train/bandwidth``, ``train/kernel_mean``, ``train/mean_pairwise_distance``,
``train/attractive_norm`` and ``train/repulsive_norm`` (and a controller's ``train/repulsion_weight``
and state); the independent coupling, which has no kernel, only the mean distance and the gradients' norm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from steinrl.core.function_space import function_space_direction
from steinrl.core.kernels import Kernel, kernel_spec, make_kernel
from steinrl.core.repulsion import Repulsion, make_repulsion, output_spread, repulsion_spec
from steinrl.core.stein import ATTRACTIVE_NORM_MAX_DIM, PRECISIONS, independent_stats, svgd_direction
from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, setting, settings_options, settings_values

__all__ = ["Coupling", "SteinCoupling", "IndependentCoupling", "COUPLINGS", "CouplingSettings", "KernelSettings",
           "SteinSettings", "make_coupling", "coupling_from", "Embed"]

#: ``() -> outputs``: the particles' outputs on B shared inputs, flattened ``(M, F)``, differentiable in
#: the parameters the particle step moves (a function-space kernel's or a spread controller's input)
Embed = Callable[[], Tensor]

_NORM = {"auto": None, "on": True, "off": False}


@dataclass(frozen=True)
class CouplingSettings:
    """A coupling's own options in the ``update`` config section (none: the base, ``independent``)."""


@dataclass(frozen=True)
class KernelSettings(CouplingSettings):
    """The Stein kernel and the repulsion's weight (normalised specs: :func:`~steinrl.core.kernels.kernel_spec`,
    :func:`~steinrl.core.repulsion.repulsion_spec`; every parameter present)."""

    kernel: dict[str, Any] = setting(
        {"name": "rbf", "bandwidth": "svpg", "space": "weights"},
        "Stein kernel: a name (rbf, imq) or {name: ..., <parameter>: ...}, e.g. {name: imq, beta: -0.3, bandwidth: "
        "s2vgd} or {space: functions, states: 64}; a mapping without name sets parameters of the kernel so far (see "
        "the kernel table below)", kind=(str, dict), normalize=kernel_spec)
    repulsion: dict[str, Any] = setting(
        {"name": "constant", "weight": 1.0},
        "Weight λ of the repulsive term: constant (1: SVGD), share (of the driving term's norm), spread (tracks a "
        "target spread on shared states) or bandit (DvD's); a name or {name: ..., <parameter>: ...}, see the "
        "controller table below", kind=(str, dict), normalize=repulsion_spec)

    def __post_init__(self) -> None:  # a name or a partial mapping (settings built in Python) as its full spec
        object.__setattr__(self, "kernel", kernel_spec(self.kernel))
        object.__setattr__(self, "repulsion", repulsion_spec(self.repulsion))


@dataclass(frozen=True)
class SteinSettings(KernelSettings):
    """The ``stein`` coupling's options."""

    attractive_norm: str = setting(
        "auto", f"Log train/attractive_norm, which costs an MxM Gram of the gradients (M²D multiply-adds, a third of "
        f"the Stein direction's at large M): auto (on for D <= {ATTRACTIVE_NORM_MAX_DIM:,} parameters per "
        f"particle), on or off; a repulsion controller computes it anyway", choices=tuple(_NORM))
    kernel_precision: str = setting(
        "full", "full, or bf16: the kernel product with the gradients (and the gradients' Gram) in bfloat16 on any "
        "device; the particle Gram behind the distances and the bandwidth stays full precision.", choices=PRECISIONS)


class Coupling:
    """Base class: φ from the particles ``theta`` and their log-target gradients ``grad``.

    Subclasses declare ``Settings`` (their keys of the ``update`` section beyond the particle
    optimizer's, each an ``__init__`` keyword; ``options`` is derived from it) and implement
    :meth:`direction`.
    """

    name: ClassVar[str] = ""
    doc: ClassVar[str] = ""
    Settings: ClassVar[type] = CouplingSettings
    options: ClassVar[tuple[Option, ...]] = ()
    #: the repulsion controller (none: SVGD's own weight, or no kernel)
    repulsion: Repulsion | None = None

    @property
    def embedding_states(self) -> int:
        """B, the shared inputs of the particles' outputs the coupling needs (0: it needs none)."""
        return 0

    def direction(self, theta: Tensor, grad: Tensor, embed: Embed | None = None,
                  params: Sequence[Tensor] = ()) -> tuple[Tensor, dict[str, Tensor]]:
        """φ and its stats from ``theta`` and ``grad`` ``(M, D)`` (0-dim stats), or ``(G, M, D)`` (G
        groups coupled only within themselves; ``(G,)`` stats); ``embed`` and the moved ``params``:
        where :attr:`embedding_states` asks for the particles' outputs. ``theta`` and ``grad`` are
        not modified; φ (any shape of as many elements) may be a new tensor or ``grad`` itself."""
        raise NotImplementedError


#: Couplings by name (the ``coupling`` of a method, :data:`steinrl.core.methods.METHODS`).
COUPLINGS: Registry[type[Coupling]] = Registry("coupling")


@COUPLINGS.register("stein")
class SteinCoupling(Coupling):
    """The SVGD direction under a Stein kernel, in weight or function space, with the repulsive
    term weighted by a controller.

    :param kernel: a :class:`~steinrl.core.kernels.Kernel` (a
        :class:`~steinrl.core.kernels.FunctionSpaceKernel` puts it on the particles' outputs),
        its name or its spec mapping.
    :param repulsion: a :class:`~steinrl.core.repulsion.Repulsion` controller or its spec
        (None or ``constant`` at 1: SVGD's direction).
    :param attractive_norm: ``auto`` / ``on`` / ``off``: log the attractive term's norm (see
        :func:`~steinrl.core.stein.svgd_direction`).
    :param kernel_precision: ``full`` or ``bf16`` kernel products (weight space).
    """

    name = "stein"
    doc = "SVGD: a Stein kernel (rbf, imq) in weight or function space, attractive + repulsive terms."
    Settings = SteinSettings
    options = settings_options(Settings)

    def __init__(self, kernel: Kernel | str | Mapping[str, Any] = "rbf",
                 repulsion: Repulsion | str | Mapping[str, Any] | None = None, attractive_norm: str = "auto",
                 kernel_precision: str = "full") -> None:
        if attractive_norm not in _NORM:
            raise ValueError(f"attractive_norm must be one of {list(_NORM)}, got {attractive_norm!r}")
        if kernel_precision not in PRECISIONS:
            raise ValueError(f"unknown precision {kernel_precision!r}; choices: {list(PRECISIONS)}")
        self.kernel = make_kernel(kernel)
        self.repulsion = make_repulsion(repulsion)
        self.attractive_norm = _NORM[attractive_norm]
        self.precision = kernel_precision

    @property
    def embedding_states(self) -> int:
        if self.kernel.space == "functions":
            return self.kernel.states
        return self.repulsion.states if self.repulsion is not None and self.repulsion.needs_embedding else 0

    def direction(self, theta: Tensor, grad: Tensor, embed: Embed | None = None,
                  params: Sequence[Tensor] = ()) -> tuple[Tensor, dict[str, Tensor]]:
        G = theta.shape[0] if theta.dim() == 3 else 1
        if self.embedding_states and embed is None:
            raise ValueError(f"{self.kernel!r} with {self.repulsion!r} needs the particles' outputs on shared "
                             "inputs: pass the particle step an embed() returning them (M, F)")
        if self.kernel.space == "functions":
            with torch.enable_grad():  # the pull-back differentiates the outputs (the particle step runs without)
                phi, stats = function_space_direction(embed(), params, grad.reshape(-1, grad.shape[-1]),
                                                     kernel=self.kernel, groups=G, repulsion=self.repulsion)
        else:
            spread = None
            if self.repulsion is not None and self.repulsion.needs_embedding:
                with torch.no_grad():
                    spread = output_spread(embed(), G, self.embedding_states)
            phi, stats = svgd_direction(theta, grad, kernel=self.kernel, attractive_norm=self.attractive_norm,
                                       precision=self.precision, repulsion=self.repulsion, spread=spread)
        if self.repulsion is not None:
            stats.update({k: v if G > 1 else v.reshape(()) for k, v in self.repulsion.info().items()})
        return phi, stats


@COUPLINGS.register("independent")
class IndependentCoupling(Coupling):
    """φ = g: every particle follows its own gradient (no kernel)."""

    name = "independent"
    doc = "No kernel: independent gradient ascent per particle."

    def direction(self, theta: Tensor, grad: Tensor, embed: Embed | None = None,
                  params: Sequence[Tensor] = ()) -> tuple[Tensor, dict[str, Tensor]]:
        return grad, independent_stats(theta, grad)


def make_coupling(name: str, **options: Any) -> Coupling:
    """The registered coupling ``name`` with its declared ``options`` (others are an error)."""
    cls = COUPLINGS.get(name)
    declared = {o.name for o in cls.options}
    unknown = sorted(set(options) - declared)
    if unknown:
        raise ValueError(f"the {name} coupling does not take {unknown}; its options: {sorted(declared) or 'none'}")
    return cls(**options)


def coupling_from(name: str, section: CouplingSettings) -> Coupling:
    """The registered coupling ``name`` with the settings ``section`` holds (an ``update`` config
    section: an instance of the coupling's ``Settings``, composed with other parts' settings)."""
    cls = COUPLINGS.get(name)
    if not isinstance(section, cls.Settings):
        raise TypeError(f"the {name} coupling takes {cls.Settings.__name__}, got {type(section).__name__}")
    return cls(**settings_values(section, cls.Settings))


def check_embedding_states(update: CouplingSettings, held: int, holds: str) -> None:
    """A ConfigError where the shared inputs a function-space kernel (``update.kernel``'s ``states``)
    or a spread controller (``update.repulsion``'s ``states``) draws are more than the ``held``
    inputs they come from; ``holds`` names them, e.g. ``"a seed's batch holds (particles x
    rollout.batch_size = 32)"``. A coupling without a kernel draws none."""
    if not isinstance(update, KernelSettings):
        return
    if update.kernel["space"] == "functions":
        key, wanted = "kernel", update.kernel["states"]
    elif update.repulsion["name"] == "spread":
        key, wanted = "repulsion", update.repulsion["states"]
    else:
        return
    if wanted > held:
        raise ConfigError(f"update.{key} states {wanted} is more than {holds}; take at most {held}")


def check_repulsion_for(update: CouplingSettings, job: str) -> None:
    """A ConfigError where ``update.repulsion`` names a controller the ``job`` cannot drive: the
    bandit needs a score per iteration (RL's best return)."""
    if isinstance(update, KernelSettings) and update.repulsion["name"] == "bandit" and job != "rl":
        raise ConfigError(f"update.repulsion bandit needs a score per training iteration (RL's best return); "
                          f"{job} has none: use constant, share or spread")
