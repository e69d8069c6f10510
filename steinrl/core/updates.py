"""Particle updates, registered by name: how the particles of a method are coupled.

``svgd`` moves them along the SVGD direction (a Stein kernel: attractive + repulsive terms;
the kernel is the ``kernel`` option, one of :data:`steinrl.core.kernels.KERNELS`, ``rbf`` by
default); ``independent`` lets every particle follow its own gradient (κ = I), the papers'
baseline. Both hand −φ to a torch optimizer (:class:`steinrl.core.svgd.SVGD`) and share
the other options of the ``update`` config section.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from steinrl.core.kernels import BANDWIDTH_RULES, KERNELS, check_bandwidth_rule
from steinrl.core.svgd import ATTRACTIVE_NORM_MAX_DIM, INDEPENDENT, OPTIMIZERS, PRECISIONS, SVGD
from steinrl.registry import Option, Registry, non_negative, step_size

__all__ = ["ParticleUpdate", "UPDATES", "UPDATE_OPTIONS", "KERNEL_OPTION", "SCALE_OPTIONS", "make_update",
           "halved_lr"]


def _check_bandwidth_option(value: str | float) -> str | None:
    try:
        check_bandwidth_rule(value)
    except ValueError:
        return f"must be {' or '.join(map(repr, BANDWIDTH_RULES))} or a positive number"
    return None


#: Options of every particle update (the ``update`` section of a run config).
UPDATE_OPTIONS: tuple[Option, ...] = (
    Option("optimizer", str, "adam", "Optimizer applied to -phi (adam: the SVPG code; rmsprop: the S²VGD paper).",
           choices=lambda: list(OPTIMIZERS)),
    Option("lr", float, 5e-3, "Step size epsilon of the particle update.", check=step_size),
    Option("bandwidth", (str, float), "svpg",
           "Kernel bandwidth h: svpg (median d² / 2 log(M+1)), s2vgd (med² / log M) or a fixed positive number.",
           check=_check_bandwidth_option),
    Option("proximal_weight", float, 0.0, "Weight of the S²VGD code's proximal term (0.1 there; 0 = off).",
           check=non_negative),
    Option("lr_halving_every", int, 0, "If > 0, halve lr every this many iterations after lr_halving_start.",
           check=non_negative),
    Option("lr_halving_start", int, 200, "First iteration at which lr halving may apply.", check=non_negative),
    Option("optimizer_eps", (float, None), None, "Epsilon of the optimizer's denominator, also of the head's own "
           "Adam (null: the optimizer's default: adam and rmsprop 1e-8, rmsprop_tf 1e-10; sgd has none; SB3's PPO "
           "uses 1e-5).",
           check=lambda v: None if v is None or v > 0 else "must be > 0 (or null)"),
)
#: The kernel of a coupled update (``svgd``).
KERNEL_OPTION = Option("kernel", str, "rbf", "Stein kernel: rbf exp(-d²/h) (the papers') or imq (1 + d²/h)^(-1/2) "
                       "(inverse multiquadric, heavier tails).", choices=KERNELS.names)
#: What a coupled update spends at large M and D (values of ``attractive_norm``: auto / on / off).
SCALE_OPTIONS = (
    Option("attractive_norm", str, "auto",
           f"Log train/attractive_norm, which costs an MxM Gram of the gradients (M²D multiply-adds, a third of "
           f"the SVGD step's at large M): auto (on for D <= {ATTRACTIVE_NORM_MAX_DIM:,} parameters per particle), "
           f"on or off.", choices=("auto", "on", "off")),
    Option("kernel_precision", str, "full",
           "full, or bf16: the kernel product with the gradients (and the gradients' Gram) in bfloat16 on any "
           "device; the particle Gram behind the distances and the bandwidth stays full precision.",
           choices=PRECISIONS),
)
_NORM = {"auto": None, "on": True, "off": False}


class ParticleUpdate:
    """A registered particle update: whether a kernel couples the particles.

    :param coupled: True: SVGD with the kernel of the ``kernel`` option (declared only
        then); False: κ = I, every particle follows its own gradient (the papers' baseline).
    :param doc: one line for the docs.
    """

    def __init__(self, coupled: bool, doc: str) -> None:
        self.coupled = bool(coupled)
        self.doc = doc
        self.options = (*UPDATE_OPTIONS, KERNEL_OPTION, *SCALE_OPTIONS) if coupled else UPDATE_OPTIONS


#: Particle updates by name.
UPDATES: Registry[ParticleUpdate] = Registry("particle update")
UPDATES.register("svgd", ParticleUpdate(True, "SVGD: a Stein kernel (rbf, imq), attractive + repulsive terms."))
UPDATES.register("independent", ParticleUpdate(False, "No kernel: independent gradient ascent per particle."))


def make_update(name: str, params: Iterable[nn.Parameter], *, optimizer: str = "adam", lr: float = 5e-3,
                bandwidth: str | float = "svpg", kernel: str = "rbf", proximal_weight: float = 0.0,
                lr_halving_every: int = 0, lr_halving_start: int = 200, groups: int = 1,
                max_norm: float | None = None, optimizer_kwargs: dict | None = None, attractive_norm: str = "auto",
                kernel_precision: str = "full", optimizer_eps: float | None = None) -> SVGD:
    """The :class:`SVGD` optimizer of the registered update ``name`` over ``params``.

    ``kernel``, ``attractive_norm`` (auto / on / off) and ``kernel_precision`` (full / bf16) are used
    by a coupled update (``svgd``) and ignored by ``independent``.
    ``lr_halving_every`` / ``lr_halving_start`` are the schedule of :func:`halved_lr`;
    the caller applies it (they are accepted here so a config section passes whole).
    ``groups``: independent groups of particles (seeds in one batch); ``max_norm``: per-particle
    clipping of φ; ``optimizer_kwargs``: extra arguments of the torch optimizer (see :class:`SVGD`);
    ``optimizer_eps``: its ``eps`` (None: the optimizer's default; sgd has none).
    """
    update = UPDATES.get(name)
    if attractive_norm not in _NORM:
        raise ValueError(f"attractive_norm must be one of {list(_NORM)}, got {attractive_norm!r}")
    return SVGD(params, lr=lr, optimizer=optimizer, kernel=kernel if update.coupled else INDEPENDENT,
                bandwidth=bandwidth, proximal=proximal_weight, groups=groups, max_norm=max_norm,
                optimizer_kwargs={**(optimizer_kwargs or {}), **({} if optimizer_eps is None or optimizer == "sgd"
                                                                  else {"eps": optimizer_eps})},
                attractive_norm=_NORM[attractive_norm],
                precision=kernel_precision if update.coupled else "full")


def halved_lr(lr: float, iteration: int, every: int, start: int) -> float:
    """The S²VGD code's schedule: ``lr`` halved every ``every`` iterations from ``start`` on
    (``every`` = 0: constant)."""
    if every > 0 and iteration >= start:
        return lr * 0.5 ** ((iteration - start) // every + 1)
    return lr
