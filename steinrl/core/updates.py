"""Particle updates, registered by name: how the particles of a method are coupled.

``svgd`` moves them along the SVGD direction (RBF kernel: attractive + repulsive terms);
``independent`` lets every particle follow its own gradient (κ = I), the papers'
baseline. Both hand −φ to a torch optimizer (:class:`steinrl.core.svgd.SVGD`) and share
the options of the ``update`` config section.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from steinrl.core.svgd import BANDWIDTH_RULES, KERNELS, OPTIMIZERS, SVGD, _check_bandwidth_rule
from steinrl.registry import Option, Registry, non_negative, positive, step_size

__all__ = ["ParticleUpdate", "UPDATES", "UPDATE_OPTIONS", "make_update", "halved_lr"]


def _check_bandwidth_option(value: str | float) -> str | None:
    try:
        _check_bandwidth_rule(value)
    except ValueError:
        return f"must be {' or '.join(map(repr, BANDWIDTH_RULES))} or a positive number"
    return None


#: Options of a particle update (the ``update`` section of a run config).
UPDATE_OPTIONS: tuple[Option, ...] = (
    Option("optimizer", str, "adam", "Optimizer applied to -phi (adam: the SVPG code; rmsprop: the S²VGD paper).",
           choices=lambda: list(OPTIMIZERS)),
    Option("lr", float, 5e-3, "Step size epsilon of the particle update.", check=step_size),
    Option("bandwidth", (str, float), "svpg",
           "RBF bandwidth h: svpg (median d² / 2 log(M+1)), s2vgd (med² / log M) or a fixed positive number.",
           check=_check_bandwidth_option),
    Option("proximal_weight", float, 0.0, "Weight of the S²VGD code's proximal term (0.1 there; 0 = off).",
           check=non_negative),
    Option("lr_halving_every", int, 0, "If > 0, halve lr every this many iterations after lr_halving_start.",
           check=non_negative),
    Option("lr_halving_start", int, 200, "First iteration at which lr halving may apply.", check=non_negative),
)


class ParticleUpdate:
    """A registered particle update: which kernel couples the particles.

    :param kernel: ``"rbf"`` (SVGD) or ``"independent"`` (κ = I: every particle follows
        its own gradient, the papers' baseline).
    :param doc: one line for the docs.
    """

    options = UPDATE_OPTIONS

    def __init__(self, kernel: str, doc: str) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; choices: {list(KERNELS)}")
        self.kernel = kernel
        self.doc = doc


#: Particle updates by name.
UPDATES: Registry[ParticleUpdate] = Registry("particle update")
UPDATES.register("svgd", ParticleUpdate("rbf", "SVGD: RBF kernel, attractive + repulsive terms (eq. 9)."))
UPDATES.register("independent", ParticleUpdate("independent", "No kernel: independent gradient ascent per particle."))


def make_update(name: str, params: Iterable[nn.Parameter], *, optimizer: str = "adam", lr: float = 5e-3,
                bandwidth: str | float = "svpg", proximal_weight: float = 0.0, lr_halving_every: int = 0,
                lr_halving_start: int = 200, groups: int = 1) -> SVGD:
    """The :class:`SVGD` optimizer of the registered update ``name`` over ``params``.

    ``lr_halving_every`` / ``lr_halving_start`` are the schedule of :func:`halved_lr`;
    the caller applies it (they are accepted here so a config section passes whole).
    ``groups``: independent groups of particles (seeds in one batch), see :class:`SVGD`.
    """
    update = UPDATES.get(name)
    return SVGD(params, lr=lr, optimizer=optimizer, kernel=update.kernel, bandwidth=bandwidth,
                proximal=proximal_weight, groups=groups)


def halved_lr(lr: float, iteration: int, every: int, start: int) -> float:
    """The S²VGD code's schedule: ``lr`` halved every ``every`` iterations from ``start`` on (``every`` = 0: constant)."""
    if every > 0 and iteration >= start:
        return lr * 0.5 ** ((iteration - start) // every + 1)
    return lr
