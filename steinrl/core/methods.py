"""Particle methods: a prior family (layer) paired with a coupling.

An algorithm name is ``<method>-<estimator>`` (``s2vgd-a2c``, ``svgd-ts``): the method
fixes how a particle's weights are parameterised and how particles are coupled.

==============  ==================  ============  =========================================
method          layer / prior       coupling      paper
==============  ==================  ============  =========================================
``svgd``        gaussian (dense)    stein (RBF)   SVPG (Liu et al., 2017)
``s2vgd``       householder (K=1)   stein         S²VGD (Zhang et al., 2018)
``vmg``         householder (K=0)   stein         S²VGD's VMG prior (no reflections)
``kron``        kronecker           stein         K-Linear prior of the Kronecker-flow paper
``independent`` gaussian (dense)    independent   independent particles, the papers' baseline
==============  ==================  ============  =========================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from steinrl.registry import Registry

__all__ = ["Method", "METHODS"]


@dataclass(frozen=True)
class Method:
    """A layer family (registered in :data:`steinrl.core.layers.LAYERS`), a coupling
    (:data:`steinrl.core.couplings.COUPLINGS`: how its particles are coupled) and the layer options
    it fixes by default."""

    layer: str
    coupling: str
    doc: str
    layer_defaults: dict[str, Any] = field(default_factory=dict)


METHODS: Registry[Method] = Registry("particle method")
METHODS.register("svgd", Method("gaussian", "stein", "SVPG: dense weights, N(0, σ²) prior, RBF kernel."))
METHODS.register("s2vgd", Method("householder", "stein", "S²VGD: W = P Λ1 C Λ2 Qᵀ with Householder P, Q."))
METHODS.register("vmg", Method("householder", "stein", "S²VGD's VMG prior: Householder layer with K = 0.",
                               {"K": 0}))
METHODS.register("kron", Method("kronecker", "stein", "K-Linear prior: W = A Λ1 C Λ2 Bᵀ, unit-triangular A, B."))
METHODS.register("independent", Method("gaussian", "independent", "Independent particles (no kernel)."))
