"""Particle updates, registered by name: how the particles' gradients become their direction φ.

- ``stein``: the SVGD direction (:func:`steinrl.core.svgd.svgd_direction`) under a Stein kernel
  (``update.kernel``, :mod:`steinrl.core.kernels`): each particle follows the kernel-weighted
  gradients of the others (attractive term) and is pushed away from them (repulsive term);
- ``independent``: κ = I, every particle follows its own gradient, the papers' baseline.

An update declares the options it adds to the ``update`` config section (the options every
update shares are the particle optimizer's, :data:`steinrl.core.particle_optimizer.OPTIMIZER_OPTIONS`)
and returns ``(phi, info)`` from :meth:`ParticleUpdate.direction`, ``info`` holding the logged
``train/bandwidth``, ``train/kernel_mean``, ``train/mean_pairwise_distance``,
``train/attractive_norm`` and ``train/repulsive_norm``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from torch import Tensor

from steinrl.core.function_space import DRIVING_TERMS, function_space_direction
from steinrl.core.kernels import Kernel, kernel_spec, make_kernel
from steinrl.core.svgd import ATTRACTIVE_NORM_MAX_DIM, PRECISIONS, direction_stats, svgd_direction
from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry

__all__ = ["ParticleUpdate", "SteinUpdate", "IndependentUpdate", "UPDATES", "KERNEL_OPTION", "make_update"]


#: ``update.kernel``: a kernel name or a mapping of its name and parameters (:func:`steinrl.core.kernels.kernel_spec`).
KERNEL_OPTION = Option("kernel", (str, dict), {"name": "rbf", "bandwidth": "svpg"},
                       "Stein kernel: a name (rbf, imq) or {name: ..., <parameter>: ...}, e.g. {name: imq, beta: "
                       "-0.3, bandwidth: s2vgd}; a mapping without name sets parameters of the kernel so far (see "
                       "the kernel table below).", normalize=kernel_spec)


class ParticleUpdate:
    """Base class: φ from the particles ``theta`` and their log-target gradients ``grad``.

    Subclasses declare ``options`` (keys of the ``update`` section beyond the optimizer's,
    each an ``__init__`` keyword) and implement :meth:`direction`.
    """

    name: ClassVar[str] = ""
    doc: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    #: ``weights``: :meth:`direction` from Θ and G; ``functions``: ``function_direction`` from the
    #: particles' outputs on shared inputs (the caller supplies them)
    kernel_space: str = "weights"

    def direction(self, theta: Tensor, grad: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """φ ``(M, D)`` or ``(G, M, D)`` (G groups coupled only within themselves) and the info
        of 0-dim or ``(G,)`` tensors. ``theta`` and ``grad`` are not modified; φ may be a new tensor
        or ``grad`` itself."""
        raise NotImplementedError


#: Particle updates by name (the ``update`` of a method, :data:`steinrl.core.methods.METHODS`).
UPDATES: Registry[type[ParticleUpdate]] = Registry("particle update")
_NORM = {"auto": None, "on": True, "off": False}


@UPDATES.register("stein")
class SteinUpdate(ParticleUpdate):
    """The SVGD direction under a Stein kernel.

    :param kernel: a :class:`~steinrl.core.kernels.Kernel`, its name or its spec mapping.
    :param attractive_norm: ``auto`` / ``on`` / ``off``: log the attractive term's norm (see
        :func:`~steinrl.core.svgd.svgd_direction`).
    :param kernel_precision: ``full`` or ``bf16`` kernel products.
    :param kernel_space: ``weights`` (the kernel on the flattened parameters) or ``functions``
        (on the particles' outputs on ``function_states`` shared inputs,
        :mod:`steinrl.core.function_space`).
    :param function_states: B, the shared inputs of the function-space kernel (drawn by the
        caller, e.g. from the batch's states).
    :param function_driving: the function-space driving term: ``weights`` (the kernel-averaged
        weight gradients) or ``functions`` (pushed forward, averaged, pulled back).
    """

    name = "stein"
    doc = "SVGD: a Stein kernel (rbf, imq), attractive + repulsive terms."
    options = (
        KERNEL_OPTION,
        Option("attractive_norm", str, "auto",
               f"Log train/attractive_norm, which costs an MxM Gram of the gradients (M²D multiply-adds, a third of "
               f"the SVGD step's at large M): auto (on for D <= {ATTRACTIVE_NORM_MAX_DIM:,} parameters per "
               f"particle), on or off.", choices=tuple(_NORM)),
        Option("kernel_precision", str, "full",
               "full, or bf16: the kernel product with the gradients (and the gradients' Gram) in bfloat16 on any "
               "device; the particle Gram behind the distances and the bandwidth stays full precision.",
               choices=PRECISIONS),
        Option("kernel_space", str, "weights",
               "weights: the kernel on the flattened parameters (the papers'); functions: on the particles' outputs "
               "(a policy's action means and in-kernel log-std, a categorical's log-probabilities, a regression "
               "net's predictions) on function_states inputs shared by every particle, the repulsion pulled back to "
               "the weights (docs/algorithms.md#the-kernel-in-function-space).", choices=("weights", "functions")),
        Option("function_states", int, 64, "kernel_space functions: B, the shared inputs, drawn each update from "
               "the batch (RL: the states of every particle of a seed, at most particles x rollout.batch_size; "
               "bandits and regression: the minibatch).",
               check=lambda v: None if v >= 2 else "must be >= 2"),
        Option("function_driving", str, "weights",
               "kernel_space functions: the driving term, weights (each particle's gradient, kernel-averaged in "
               "weight space; measured the better on bandits and regression: docs/results/kernels.md) or functions "
               "(pushed forward to the outputs, averaged there, pulled back).", choices=DRIVING_TERMS),
    )

    def __init__(self, kernel: Kernel | str | Mapping[str, Any] = "rbf", attractive_norm: str = "auto",
                 kernel_precision: str = "full", kernel_space: str = "weights", function_states: int = 64,
                 function_driving: str = "weights") -> None:
        if attractive_norm not in _NORM:
            raise ValueError(f"attractive_norm must be one of {list(_NORM)}, got {attractive_norm!r}")
        if kernel_precision not in PRECISIONS:
            raise ValueError(f"unknown precision {kernel_precision!r}; choices: {list(PRECISIONS)}")
        if kernel_space not in ("weights", "functions"):
            raise ValueError(f"kernel_space must be weights or functions, got {kernel_space!r}")
        if function_driving not in DRIVING_TERMS or function_states < 2:
            raise ValueError(f"function_driving must be one of {DRIVING_TERMS} and function_states >= 2, got "
                             f"{function_driving!r}, {function_states!r}")
        self.kernel = make_kernel(kernel)
        self.attractive_norm = _NORM[attractive_norm]
        self.precision = kernel_precision
        self.kernel_space, self.function_states, self.driving = kernel_space, int(function_states), function_driving

    def direction(self, theta: Tensor, grad: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return svgd_direction(theta, grad, kernel=self.kernel, attractive_norm=self.attractive_norm,
                              precision=self.precision)

    def function_direction(self, outputs: Tensor, params: Sequence[Tensor], grad: Tensor,
                           groups: int = 1) -> tuple[Tensor, dict[str, Tensor]]:
        """φ ``(M, D)`` with the kernel on ``outputs`` ``(M, F)`` (differentiable in ``params``)
        (:func:`~steinrl.core.function_space.function_space_direction`)."""
        return function_space_direction(outputs, params, grad, kernel=self.kernel, groups=groups,
                                        driving=self.driving)


@UPDATES.register("independent")
class IndependentUpdate(ParticleUpdate):
    """φ = g: every particle follows its own gradient (no kernel)."""

    name = "independent"
    doc = "No kernel: independent gradient ascent per particle."

    def direction(self, theta: Tensor, grad: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return grad, direction_stats(theta, grad)


def make_update(name: str, **options: Any) -> ParticleUpdate:
    """The registered update ``name`` with its declared ``options`` (others are an error)."""
    cls = UPDATES.get(name)
    declared = {o.name for o in cls.options}
    unknown = sorted(set(options) - declared)
    if unknown:
        raise ValueError(f"the {name} update does not take {unknown}; its options: {sorted(declared) or 'none'}")
    return cls(**options)


def check_function_states(update: Mapping[str, Any], held: int, holds: str) -> None:
    """A ConfigError where a function-space kernel's B (``update.function_states`` of the
    ``update`` section's values) is more than the ``held`` inputs it is drawn from; ``holds``
    names them, e.g. ``"a seed's batch holds (particles x rollout.batch_size = 32)"``."""
    if update.get("kernel_space") == "functions" and update["function_states"] > held:
        raise ConfigError(f"update.function_states {update['function_states']} is more than {holds}; "
                          f"take at most {held}")
