"""steinrl: ensembles of M particles moved by Stein variational gradient descent, with
structured (Householder / Kronecker) weight priors, for policy gradient and beyond.

The particle core (torch only) is imported eagerly::

    from steinrl import ParticleOptimizer, SteinCoupling, RBFKernel, EnsembleMLP, GaussianPrior

The run layer is imported on first use::

    cfg = steinrl.load_config(algo="svgd-a2c", env="Cartpole", overrides={"iterations": 3})
    trainer = steinrl.Trainer(cfg)          # no files, no directories
    metrics = trainer.step()
"""

from typing import Any

__version__ = "0.3.0"

from steinrl.core import (  # noqa: E402
    COUPLINGS,
    LAYERS,
    METHODS,
    PRIORS,
    EnsembleMLP,
    GaussianPrior,
    IMQKernel,
    IndependentCoupling,
    InvGammaPrior,
    JointGammaPrior,
    ParticleOptimizer,
    RBFKernel,
    SteinCoupling,
    make_layer,
    make_prior,
    mlp_forward,
    svgd_direction,
)
from steinrl.errors import ConfigError  # noqa: E402

_LAZY = {"Trainer": "steinrl.run.trainer", "load_config": "steinrl.run.config", "Config": "steinrl.run.config"}

__all__ = ["ParticleOptimizer", "SteinCoupling", "IndependentCoupling", "RBFKernel", "IMQKernel", "EnsembleMLP",
           "GaussianPrior", "InvGammaPrior", "JointGammaPrior", "LAYERS", "METHODS", "PRIORS", "COUPLINGS",
           "make_layer", "make_prior", "mlp_forward", "svgd_direction", "ConfigError", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'steinrl' has no attribute {name!r}")
