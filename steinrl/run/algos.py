"""Algorithm names are compositions: ``<update>-<estimator>``.

The *update* fixes the weight prior family (the layer type) and whether particles are
coupled by the Stein kernel; the *estimator* fixes how J(theta) is estimated.

==============  ================  ============  ==========================================
update          layer / prior     kernel        paper
==============  ================  ============  ==========================================
``svgd``        gaussian (dense)  RBF           SVPG (Liu et al., 2017)
``s2vgd``       householder       RBF           S²VGD (Zhang et al., 2018)
``kron``        kronecker         RBF           K-Linear prior of the Kronecker-flow paper
``independent`` gaussian (dense)  none          independent agents, the papers' baseline
==============  ================  ============  ==========================================

Estimators: ``reinforce`` (standardised discounted returns-to-go, no critic) and
``a2c`` (a value network per particle, GAE(lambda) advantages).
"""

from __future__ import annotations

from dataclasses import dataclass

from steinrl.errors import ConfigError


@dataclass(frozen=True)
class Update:
    """How particles move: which structured layer they use and which kernel couples them."""

    layer: str
    kernel: str


UPDATES: dict[str, Update] = {
    "svgd": Update(layer="gaussian", kernel="rbf"),
    "s2vgd": Update(layer="householder", kernel="rbf"),
    "kron": Update(layer="kronecker", kernel="rbf"),
    "independent": Update(layer="gaussian", kernel="independent"),
}

ESTIMATORS: tuple[str, ...] = ("reinforce", "a2c")

ALGOS: tuple[str, ...] = tuple(f"{u}-{e}" for u in UPDATES for e in ESTIMATORS)


def parse_algo(name: str) -> tuple[Update, str]:
    """Split ``<update>-<estimator>`` into its parts; unknown names list the valid ones."""
    update, _, estimator = name.partition("-")
    if update not in UPDATES or estimator not in ESTIMATORS:
        raise ConfigError(f"unknown algo {name!r}; valid algos: {', '.join(ALGOS)}")
    return UPDATES[update], estimator
