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

from collections.abc import Mapping
from typing import Any, ClassVar

from torch import Tensor

from steinrl.core.kernels import Kernel, kernel_spec, make_kernel
from steinrl.core.svgd import ATTRACTIVE_NORM_MAX_DIM, PRECISIONS, direction_stats, svgd_direction
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
    )

    def __init__(self, kernel: Kernel | str | Mapping[str, Any] = "rbf", attractive_norm: str = "auto",
                 kernel_precision: str = "full") -> None:
        if attractive_norm not in _NORM:
            raise ValueError(f"attractive_norm must be one of {list(_NORM)}, got {attractive_norm!r}")
        if kernel_precision not in PRECISIONS:
            raise ValueError(f"unknown precision {kernel_precision!r}; choices: {list(PRECISIONS)}")
        self.kernel = make_kernel(kernel)
        self.attractive_norm = _NORM[attractive_norm]
        self.precision = kernel_precision

    def direction(self, theta: Tensor, grad: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return svgd_direction(theta, grad, kernel=self.kernel, attractive_norm=self.attractive_norm,
                              precision=self.precision)


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

